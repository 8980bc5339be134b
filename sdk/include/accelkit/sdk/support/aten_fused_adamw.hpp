// AtenFusedAdamW: AdamW through LibTorch's own fused multi-tensor kernel, at::_fused_adamw_
// (compat::aten_fused_adamw_available says where: CUDA from LibTorch 2.0, CPU from 2.4), as a
// torch::optim::AdamW. Param groups, options and per-parameter state are AdamW's own types, so
// checkpoints move both ways between this class and torch::optim::AdamW (the step counter is
// AdamWParamState::step; the float step tensors the kernel reads are kept beside it).
//
// The update is PyTorch's fused AdamW (torch.optim.AdamW(fused=True)): the same math as
// torch::optim::AdamW, with the kernel's own float rounding. State tensors take the parameter's
// dtype, as in torch::optim::AdamW. Parameters are grouped per (device, dtype) for the kernel;
// sparse gradients are refused, as in LibTorch. `maximize` ascends (PyTorch's maximize).
//
// Header-only, so a plugin and the core use it without linking each other. Thread-safety: as
// any torch::optim::Optimizer, one step at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/optim/adamw.h>

#include "accelkit/sdk/support/adamw_state.hpp"
#include "accelkit/sdk/torch_compat.hpp"

namespace accelkit::support {

class AtenFusedAdamW : public torch::optim::AdamW {
 public:
  explicit AtenFusedAdamW(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                          torch::optim::AdamWOptions defaults = {}, bool maximize = false)
      : torch::optim::AdamW(std::move(param_groups), std::move(defaults)), maximize_(maximize) {}
  explicit AtenFusedAdamW(std::vector<at::Tensor> params, torch::optim::AdamWOptions defaults = {},
                          bool maximize = false)
      : AtenFusedAdamW({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults), maximize) {}

  // Whether this LibTorch can step parameters on `type` with it.
  // (LibTorch's own kernels, or one registered for the type at run time.)
  static bool available(c10::DeviceType type) { return compat::aten_fused_adamw_registered(type); }

  bool maximize() const { return maximize_; }

  std::string implementation() const { return "ATen fused AdamW (at::_fused_adamw_)"; }

  at::Tensor step(LossClosure closure = nullptr) override {
    at::NoGradGuard no_grad;
    at::Tensor loss;
    if (closure != nullptr) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
      // One kernel call per (device, dtype), as PyTorch groups them.
      struct Lists {
        std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
      };
      std::map<std::pair<std::string, int>, Lists> lists;
      for (auto& p : group.params()) {
        const auto& grad = p.grad();
        if (!grad.defined()) continue;
        TORCH_CHECK(!grad.is_sparse(), "AdamW does not support sparse gradients");
        TORCH_CHECK(available(p.device().type()), "AtenFusedAdamW: LibTorch ", TORCH_VERSION_MAJOR, ".",
                    TORCH_VERSION_MINOR, " has no fused AdamW kernel for ", p.device());
        auto& st = state_for(p, o.amsgrad());
        st.step(st.step() + 1);
        auto& step_tensor = step_tensor_for(p, st.step());
        Lists& l = lists[{p.device().str(), static_cast<int>(p.scalar_type())}];
        l.params.push_back(p);
        l.grads.push_back(grad.scalar_type() == p.scalar_type() ? grad : grad.to(p.scalar_type()));
        l.exp_avgs.push_back(st.exp_avg());
        l.exp_avg_sqs.push_back(st.exp_avg_sq());
        if (o.amsgrad()) l.max_exp_avg_sqs.push_back(st.max_exp_avg_sq());
        l.steps.push_back(step_tensor);
      }
      const auto [beta1, beta2] = o.betas();
      for (auto& [where, l] : lists)
        compat::aten_fused_adamw_(l.params, l.grads, l.exp_avgs, l.exp_avg_sqs, l.max_exp_avg_sqs, l.steps, o.lr(),
                                  beta1, beta2, o.weight_decay(), o.eps(), o.amsgrad(), maximize_);
    }
    return loss;
  }

 private:
  torch::optim::AdamWParamState& state_for(const at::Tensor& p, bool amsgrad) {
    const auto key = compat::optimizer_state_key(state_, p);
    auto it = state_.find(key);
    if (it == state_.end()) {
      auto st = std::make_unique<torch::optim::AdamWParamState>();
      st->step(0);
      st->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      st->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      it = state_.emplace(key, std::move(st)).first;
    }
    auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
    if (amsgrad && !st.max_exp_avg_sq().defined()) st.max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
    // A loaded checkpoint's state may sit elsewhere or in another dtype, and a parameter may
    // have changed its layout (step tuning's channels-last weights): the kernel wants the
    // parameter's device, dtype and strides.
    auto settle = [&](const at::Tensor& s) {
      if (s.device() == p.device() && s.scalar_type() == p.scalar_type() && s.strides() == p.strides()) return s;
      return with_layout(s.to(p.options()), p);
    };
    st.exp_avg(settle(st.exp_avg()));
    st.exp_avg_sq(settle(st.exp_avg_sq()));
    if (st.max_exp_avg_sq().defined()) st.max_exp_avg_sq(settle(st.max_exp_avg_sq()));
    return st;
  }

  // The float step tensor the kernel reads for p, set to AdamWParamState::step (the count a
  // checkpoint holds) before every step.
  at::Tensor& step_tensor_for(const at::Tensor& p, std::int64_t step) {
    at::Tensor& tensor = steps_[p.unsafeGetTensorImpl()];
    if (!tensor.defined() || tensor.device() != p.device())
      tensor = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(p.device()));
    tensor.fill_(static_cast<double>(step));
    return tensor;
  }

  bool maximize_;
  std::unordered_map<const c10::TensorImpl*, at::Tensor> steps_;
};

}  // namespace accelkit::support
