// AtenFusedSGD: SGD through LibTorch's own fused multi-tensor kernel, at::_fused_sgd_
// (compat::aten_fused_sgd_available says where: CUDA from LibTorch 2.3, CPU from 2.4), as a
// torch::optim::SGD. Param groups, options (momentum, dampening, Nesterov, weight decay) and
// per-parameter state (SGDParamState::momentum_buffer) are SGD's own types, so checkpoints move
// both ways between this class and torch::optim::SGD, and a schedule that sets the options'
// learning rate is followed.
//
// The update is PyTorch's fused SGD (torch.optim.SGD(fused=True)): torch::optim::SGD's math -
// the weight decay added to the gradient, the first step's buffer the decayed gradient itself,
// later buffers momentum * buf + (1 - dampening) * grad, Nesterov's grad + momentum * buf - in
// one pass per (device, dtype) list, with the kernel's own float rounding. Sparse gradients are
// refused, as in LibTorch.
//
// Header-only, so a plugin and the core use it without linking each other. Thread-safety: as
// any torch::optim::Optimizer, one step at a time.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/optim/sgd.h>

#include "accelkit/sdk/torch_compat.hpp"

namespace accelkit::support {

class AtenFusedSGD : public torch::optim::SGD {
 public:
  explicit AtenFusedSGD(std::vector<torch::optim::OptimizerParamGroup> param_groups, torch::optim::SGDOptions defaults)
      : torch::optim::SGD(std::move(param_groups), std::move(defaults)) {}
  explicit AtenFusedSGD(std::vector<at::Tensor> params, torch::optim::SGDOptions defaults)
      : AtenFusedSGD({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

  // Whether this LibTorch can step parameters on `type` with it.
  static bool available(c10::DeviceType type) { return compat::aten_fused_sgd_available(type); }

  std::string implementation() const { return "ATen fused SGD (at::_fused_sgd_)"; }

  at::Tensor step(LossClosure closure = nullptr) override {
    at::NoGradGuard no_grad;
    at::Tensor loss;
    if (closure != nullptr) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
      const bool momentum = o.momentum() != 0;
      // One kernel call per (device, dtype, first step or not): is_first_step is one flag per call.
      struct Lists {
        std::vector<at::Tensor> params, grads, buffers;
      };
      std::map<std::tuple<std::string, int, bool>, Lists> lists;
      for (auto& p : group.params()) {
        const auto& grad = p.grad();
        if (!grad.defined()) continue;
        TORCH_CHECK(!grad.is_sparse(), "SGD: AtenFusedSGD does not support sparse gradients");
        TORCH_CHECK(available(p.device().type()), "AtenFusedSGD: LibTorch ", TORCH_VERSION_MAJOR, ".",
                    TORCH_VERSION_MINOR, " has no fused SGD kernel for ", p.device());
        bool first = false;
        at::Tensor buffer;
        if (momentum) buffer = buffer_for(p, first);
        Lists& l = lists[{p.device().str(), static_cast<int>(p.scalar_type()), first}];
        l.params.push_back(p);
        l.grads.push_back(grad.scalar_type() == p.scalar_type() ? grad : grad.to(p.scalar_type()));
        if (momentum) l.buffers.push_back(buffer);
      }
      for (auto& [key, l] : lists)
        compat::aten_fused_sgd_(l.params, l.grads, l.buffers, o.weight_decay(), o.momentum(), o.lr(), o.dampening(),
                                o.nesterov(), /*maximize=*/false, /*is_first_step=*/std::get<2>(key));
    }
    return loss;
  }

 private:
  // p's momentum buffer: a fresh one (first = true: the kernel fills it) or the state's, moved to
  // p's device and dtype where a loaded checkpoint left it elsewhere.
  at::Tensor buffer_for(const at::Tensor& p, bool& first) {
    const auto key = compat::optimizer_state_key(state_, p);
    auto it = state_.find(key);
    if (it == state_.end()) {
      auto st = std::make_unique<torch::optim::SGDParamState>();
      st->momentum_buffer(at::empty_like(p, at::MemoryFormat::Preserve));
      it = state_.emplace(key, std::move(st)).first;
      first = true;
    }
    auto& st = static_cast<torch::optim::SGDParamState&>(*it->second);
    const at::Tensor& b = st.momentum_buffer();
    if (!b.defined()) {
      st.momentum_buffer(at::empty_like(p, at::MemoryFormat::Preserve));
      first = true;
    } else if (b.device() != p.device() || b.scalar_type() != p.scalar_type() || b.strides() != p.strides()) {
      at::Tensor settled = at::empty_like(p, at::MemoryFormat::Preserve);  // the kernel wants p's layout
      settled.copy_(b);
      st.momentum_buffer(settled);
    }
    return st.momentum_buffer();
  }
};

}  // namespace accelkit::support
