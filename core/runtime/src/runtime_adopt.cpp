// Runtime::prepare(module, optimizer) and Runtime::step: the program's own optimizer, stepped
// with the device's fused update where it has one (adopted_optimizer.hpp).
#include <ATen/autocast_mode.h>
#include <spdlog/spdlog.h>
#include <torch/nn/module.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "accelkit/runtime.hpp"
#include "adopted_optimizer.hpp"
#include "tuning/step_tuning_control.hpp"

namespace accelkit {

namespace {

AdamWConfig adamw_config_of(detail::AdoptedKind kind, const torch::optim::OptimizerOptions& options) {
  AdamWConfig c;
  auto fill = [&](const auto& o) {
    c.lr = o.lr();
    c.beta1 = std::get<0>(o.betas());
    c.beta2 = std::get<1>(o.betas());
    c.eps = o.eps();
    c.amsgrad = o.amsgrad();
  };
  if (kind == detail::AdoptedKind::adam) {
    fill(static_cast<const torch::optim::AdamOptions&>(options));
    c.weight_decay = 0;  // Adam's L2 term goes into the gradient (adopted_optimizer.hpp)
  } else {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(options);
    fill(o);
    c.weight_decay = o.weight_decay();
  }
  return c;
}

}  // namespace

detail::AdoptedOptimizer& Runtime::adopt(torch::optim::Optimizer& optimizer) {
  auto make_engine = [this](detail::AdoptedKind kind, const std::vector<at::Tensor>& params,
                            const torch::optim::OptimizerOptions& options) -> OptimizerChoice {
    if (kind == detail::AdoptedKind::sgd) {
      const auto& o = static_cast<const torch::optim::SGDOptions&>(options);
      return make_sgd_as(params, SGDConfig{o.lr(), o.momentum(), o.dampening(), o.weight_decay(), o.nesterov()},
                         current_.fused_optimizer);
    }
    return make_adamw_as(params, adamw_config_of(kind, options), current_.fused_optimizer, false);
  };
  if (!adopted_) adopted_ = std::make_unique<detail::AdoptedOptimizers>();
  auto& a = adopted_->add(std::make_unique<detail::AdoptedOptimizer>(optimizer, make_engine));
  steps_->expect_step_marks();  // its steps will mark the training steps (step tuning)
  const Adoption& d = a.adoption();
  decide("optimizer", d.implementation, d.optimizer + " of the program", d.why);
  return a;
}

Adoption Runtime::prepare(torch::nn::Module& module, torch::optim::Optimizer& optimizer) {
  prepare(module);
  Adoption a = adopt(optimizer).adoption();
  // The model names step tuning's cache entry, whichever optimizer made its engine above.
  steps_->note_model(module.parameters(), "model");
  return a;
}

at::Tensor Runtime::step(torch::optim::Optimizer& optimizer, const std::function<at::Tensor()>& closure) {
  detail::AdoptedOptimizer* a = adopted_ ? adopted_->find(optimizer) : nullptr;
  at::Tensor loss = (a != nullptr ? *a : adopt(optimizer)).step(closure);
  steps_->optimizer_stepped(&optimizer);  // the next training step begins (step tuning)
  // The weights changed: autocast's casts of them, which it keeps while the thread's autocast is
  // on outside any scope (the plan turns it on at start), are stale now.
  if (AutocastScope::depth() == 0) at::autocast::clear_cache();
  return loss;
}

}  // namespace accelkit
