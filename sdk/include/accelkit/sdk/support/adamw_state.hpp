// What every fused AdamW needs around its kernel, written once for the plugins in this tree
// and for out-of-tree ones: the AdamWConfig -> torch::optim::AdamWOptions conversion, bringing
// a (loaded) state tensor to the kernel's dtype, device and layout, and the reference update
// (LibTorch's own AdamW math with ATen ops) for the dtypes a kernel does not take.
//
// Header-only. The update functions run under the caller's NoGradGuard, as an optimizer's
// step() does.
#pragma once

#include <cmath>
#include <memory>
#include <tuple>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/max.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>
#include <torch/optim/adamw.h>

#include "accelkit/sdk/optimizer.hpp"
#include "accelkit/sdk/torch_compat.hpp"

namespace accelkit::support {

// The torch::optim::AdamW options for `c` (maximize and master weights are the optimizer's
// own: torch::optim::AdamWOptions has neither).
inline torch::optim::AdamWOptions adamw_options(const AdamWConfig& c) {
  return torch::optim::AdamWOptions(c.lr)
      .betas(std::make_tuple(c.beta1, c.beta2))
      .eps(c.eps)
      .weight_decay(c.weight_decay)
      .amsgrad(c.amsgrad);
}

// `t` with `like`'s strides (`t` itself when it has them already).
inline at::Tensor with_layout(const at::Tensor& t, const at::Tensor& like) {
  if (t.strides() == like.strides()) return t;
  auto out = at::empty_strided(like.sizes(), like.strides(), t.options());
  out.copy_(t);
  return out;
}

// Brings state tensor `s` of parameter `p` to float, on p's device, in the kernel's work
// layout (once: the caller stores it back), so the kernel updates it in place from then on.
// A state loaded from a checkpoint in bfloat16, or saved on another device, is converted
// here. `who` and `name` name the optimizer and the state in the error for a wrong shape.
inline void settle_state(at::Tensor& s, const at::Tensor& p, const at::Tensor& work, const char* who,
                         const char* name) {
  TORCH_CHECK(s.sizes() == p.sizes(), who, ": ", name, " has shape ", s.sizes(), " but its parameter has ",
              p.sizes());
  if (s.device() != p.device() || s.scalar_type() != at::kFloat) s = s.to(p.device(), at::kFloat);
  s = with_layout(s, work);
}

// One AdamW step of `p` with ATen ops, torch::optim::AdamW's math (plus maximize): for the
// dtypes a kernel does not take (double, half). bc1, bc2: the bias corrections 1 - beta^step.
inline void reference_update(at::Tensor& p, at::Tensor grad, torch::optim::AdamWParamState& st,
                             const torch::optim::AdamWOptions& o, bool maximize, double bc1, double bc2) {
  if (maximize) grad = grad.neg();
  if (o.weight_decay() != 0) p.mul_(1 - o.lr() * o.weight_decay());
  const auto [beta1, beta2] = o.betas();
  st.exp_avg().mul_(beta1).add_(grad, 1 - beta1);
  st.exp_avg_sq().mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  at::Tensor d = st.exp_avg_sq();
  if (o.amsgrad()) {
    at::max_out(st.max_exp_avg_sq(), st.exp_avg_sq(), st.max_exp_avg_sq());
    d = st.max_exp_avg_sq();
  }
  const auto denom = (d.sqrt() / std::sqrt(bc2)).add_(o.eps());
  p.addcdiv_(st.exp_avg(), denom, -o.lr() / bc1);
}

// One parameter made ready for a fused AdamW kernel (prepare_adamw_param).
struct PreparedParam {
  torch::optim::AdamWParamState* state = nullptr;  // its state, step already advanced
  double bc1 = 1, bc2 = 1;  // bias corrections 1 - beta^step
  bool run_kernel = false;  // false: nothing left to do (updated by reference_update, or empty)
  at::Tensor work;          // the buffer the kernel updates: the parameter, or a dense copy
  at::Tensor grad;          // the gradient in work's dtype and layout
  bool copy_back = false;   // work is a copy: write it back to the parameter after the kernel
};

// Everything a fused AdamW step does for one parameter before its kernel runs: the sparse and
// shape checks, the state (created, or taken from a loaded checkpoint: float for kernel
// dtypes, the parameter's dtype otherwise, as torch::optim::AdamW), the step advanced, the
// bias corrections; for a dtype the kernel does not take (`kernel_dtype` false) the update
// itself, with reference_update. `states` is the optimizer's state_ map; `p` has a gradient.
template <class StateMap>
PreparedParam prepare_adamw_param(StateMap& states, const at::Tensor& p, const torch::optim::AdamWOptions& o,
                                  bool maximize, bool kernel_dtype, const char* who) {
  const at::Tensor& grad = p.grad();
  TORCH_CHECK(!grad.is_sparse(), "AdamW does not support sparse gradients");
  TORCH_CHECK(grad.sizes() == p.sizes(), who, ": gradient shape ", grad.sizes(), " differs from its parameter's ",
              p.sizes());
  const auto state_options = kernel_dtype ? p.options().dtype(at::kFloat) : p.options();
  const auto key = compat::optimizer_state_key(states, p);
  auto it = states.find(key);
  if (it == states.end()) {
    auto st = std::make_unique<torch::optim::AdamWParamState>();
    st->step(0);
    st->exp_avg(at::zeros_like(p, state_options, at::MemoryFormat::Preserve));
    st->exp_avg_sq(at::zeros_like(p, state_options, at::MemoryFormat::Preserve));
    if (o.amsgrad()) st->max_exp_avg_sq(at::zeros_like(p, state_options, at::MemoryFormat::Preserve));
    it = states.emplace(key, std::move(st)).first;
  }
  PreparedParam out;
  auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
  out.state = &st;
  if (o.amsgrad() && !st.max_exp_avg_sq().defined())
    st.max_exp_avg_sq(at::zeros_like(p, state_options, at::MemoryFormat::Preserve));
  st.step(st.step() + 1);
  const auto [beta1, beta2] = o.betas();
  out.bc1 = 1 - std::pow(beta1, st.step());
  out.bc2 = 1 - std::pow(beta2, st.step());
  if (!kernel_dtype) {
    at::Tensor param = p;
    reference_update(param, grad, st, o, maximize, out.bc1, out.bc2);
    return out;
  }
  if (p.numel() == 0) return out;
  // The kernel wants flat buffers in one element order: p's own when p is dense, else a
  // contiguous copy written back after the step. State lives in that layout (zeros_like with
  // Preserve gives it); a gradient in another layout or dtype is converted for the step.
  out.run_kernel = true;
  out.work = p;
  if (!p.is_non_overlapping_and_dense()) {
    out.work = p.contiguous();
    out.copy_back = true;
  }
  settle_state(st.exp_avg(), p, out.work, who, "exp_avg");
  settle_state(st.exp_avg_sq(), p, out.work, who, "exp_avg_sq");
  if (o.amsgrad()) settle_state(st.max_exp_avg_sq(), p, out.work, who, "max_exp_avg_sq");
  out.grad = with_layout(grad.scalar_type() == p.scalar_type() ? grad : grad.to(p.scalar_type()), out.work);
  return out;
}

}  // namespace accelkit::support
