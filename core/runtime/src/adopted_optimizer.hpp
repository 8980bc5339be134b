// The program's own optimizer, stepped by the runtime (Runtime::prepare(module, optimizer),
// Runtime::step(optimizer)): a torch::optim::Adam, AdamW or SGD whose update the device has fused
// is stepped by that implementation (the "engine") on the optimizer's own param groups, options
// and state; anything else steps as it is, with the reason.
//
// The optimizer stays the program's: its options are read before every step (so a learning-rate
// schedule that writes them works), its state holds the moments and counts after every step (so
// torch::save/torch::load of it moves checkpoints both ways with torch::optim), and a state the
// program loads or replaces is the one the next step continues from. The engine is a
// torch::optim::AdamW or SGD subclass over the same parameters whose state entries share the
// program's state tensors.
//
// Adam is AdamW without decoupled decay on the gradient plus its L2 term: torch::optim::Adam's
// update with weight_decay wd is AdamW's with weight_decay 0 on grad + wd * param, which is what
// the engine is given (the program's gradients are put back after the step).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

namespace accelkit {
struct Adoption;
struct OptimizerChoice;
}  // namespace accelkit

namespace accelkit::detail {

// Which torch::optim optimizer an object is, exactly (a subclass is `other`: its step may not be
// the base class's).
enum class AdoptedKind { adam, adamw, sgd, other };

// The kind and a name for messages ("torch::optim::Adam", "a subclass of torch::optim::SGD
// (MySGD)", "torch::optim::RMSprop").
AdoptedKind adopted_kind(const torch::optim::Optimizer& optimizer, std::string& name);

class AdoptedOptimizer {
 public:
  // Makes the engine for `kind` over `params` with the first group's options (Runtime::make_adamw
  // or make_sgd, as the settings choose); a choice that is torch::optim's own means no engine.
  using MakeEngine = std::function<OptimizerChoice(AdoptedKind kind, const std::vector<at::Tensor>& params,
                                                   const torch::optim::OptimizerOptions& options)>;

  // Throws std::invalid_argument for an optimizer whose options the engine cannot follow.
  AdoptedOptimizer(torch::optim::Optimizer& optimizer, MakeEngine maker);
  ~AdoptedOptimizer();
  AdoptedOptimizer(const AdoptedOptimizer&) = delete;
  AdoptedOptimizer& operator=(const AdoptedOptimizer&) = delete;

  // One step: the engine's on the program's options and state, or the program's own.
  at::Tensor step(const torch::optim::Optimizer::LossClosure& closure);
  const Adoption& adoption() const noexcept { return *adoption_; }
  const torch::optim::Optimizer& user() const noexcept { return user_; }
  // Whether `optimizer` is the object this adopted (the same object of the same type).
  bool adopts(const torch::optim::Optimizer& optimizer) const;

 private:
  void make_engine();
  bool groups_changed() const;
  void sync_options();
  void state_in();
  void state_out();
  at::Tensor engine_step(const torch::optim::Optimizer::LossClosure& closure);

  torch::optim::Optimizer& user_;
  const std::type_info* type_;
  AdoptedKind kind_;
  MakeEngine make_engine_;
  std::shared_ptr<torch::optim::Optimizer> engine_;  // null: the program's own step
  std::unique_ptr<Adoption> adoption_;
  // The user's parameters the engine was built over, group by group.
  std::vector<std::vector<const void*>> built_over_;
  std::int64_t steps_ = 0;
};

// The runtime's adopted optimizers, by object.
class AdoptedOptimizers {
 public:
  // The adoption of `optimizer`, or null.
  AdoptedOptimizer* find(const torch::optim::Optimizer& optimizer);
  // Adds it, in place of an earlier adoption of an object at the same address.
  AdoptedOptimizer& add(std::unique_ptr<AdoptedOptimizer> adopted);

 private:
  std::vector<std::unique_ptr<AdoptedOptimizer>> list_;
};

}  // namespace accelkit::detail
