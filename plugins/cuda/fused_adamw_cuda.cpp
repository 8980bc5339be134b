#include "fused_adamw_cuda.hpp"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>
#include <map>
#include <tuple>
#include <unordered_set>

#include "accelkit/torch_compat.hpp"
#include "fused_adamw_launch.hpp"

namespace accelkit::cuda {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

at::Tensor with_layout(const at::Tensor& t, const at::Tensor& like) {
  if (t.strides() == like.strides()) return t;
  auto out = at::empty_strided(like.sizes(), like.strides(), t.options());
  out.copy_(t);
  return out;
}

void settle_state(at::Tensor& s, const at::Tensor& p, const at::Tensor& work, const char* name) {
  TORCH_CHECK(s.sizes() == p.sizes(), "FusedAdamWCuda: ", name, " has shape ", s.sizes(), " but its parameter has ",
              p.sizes());
  if (s.device() != p.device() || s.scalar_type() != at::kFloat) s = s.to(p.device(), at::kFloat);
  s = with_layout(s, work);
}

void ops_update(at::Tensor& p, at::Tensor grad, AdamWParamState& st, const AdamWOptions& o, bool maximize,
                double bc1, double bc2) {
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

AdamWDtype kernel_dtype(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return AdamWDtype::bf16;
    case at::kHalf: return AdamWDtype::f16;
    default: return AdamWDtype::f32;
  }
}

}  // namespace

FusedAdamWCuda::FusedAdamWCuda(std::vector<torch::optim::OptimizerParamGroup> param_groups, AdamWOptions defaults,
                               bool maximize)
    : AdamW(std::move(param_groups), std::move(defaults)), maximize_(maximize) {}

FusedAdamWCuda::FusedAdamWCuda(std::vector<torch::Tensor> params, AdamWOptions defaults, bool maximize)
    : FusedAdamWCuda({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults), maximize) {}

void FusedAdamWCuda::set_capturable(bool capturable) {
  if (capturable_ && !capturable) sync_host_steps();
  capturable_ = capturable;
  if (!capturable_) device_steps_.clear();
}

void FusedAdamWCuda::sync_host_steps() {
  if (!capturable_) return;
  for (auto& group : param_groups_)
    for (auto& p : group.params()) {
      auto it = state_.find(compat::optimizer_state_key(state_, p));
      auto ds = device_steps_.find(p.unsafeGetTensorImpl());
      if (it == state_.end() || ds == device_steps_.end()) continue;
      static_cast<AdamWParamState&>(*it->second).step(static_cast<int64_t>(ds->second.item<float>()));
    }
}

std::string FusedAdamWCuda::implementation() const {
  return std::string("fused multi-tensor AdamW (CUDA") + (capturable_ ? ", capturable)" : ")");
}

torch::Tensor FusedAdamWCuda::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }

  // One launch list per (device, dtype) within a group: the group's constants are shared.
  struct Batch {
    std::vector<AdamWTensorArgs> tensors;
  };
  std::vector<at::Tensor> keep;                              // converted grads the launches read
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (param, dense work copy)
  std::unordered_set<const void*> seen;

  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    const auto [beta1, beta2] = o.betas();
    std::map<std::pair<int, int>, Batch> batches;  // (device index, dtype)
    std::vector<at::Tensor> steps_to_advance;

    for (auto& p : group.params()) {
      const auto& grad = p.grad();
      if (!grad.defined()) continue;
      TORCH_CHECK(!grad.is_sparse(), "AdamW does not support sparse gradients");
      TORCH_CHECK(seen.insert(p.unsafeGetTensorImpl()).second,
                  "FusedAdamWCuda: a parameter appears more than once in the param groups");
      TORCH_CHECK(p.is_cuda() && grad.device() == p.device(), "FusedAdamWCuda: parameter and gradient must be on "
                  "the same CUDA device, got ", p.device(), " and ", grad.device());
      TORCH_CHECK(grad.sizes() == p.sizes(), "FusedAdamWCuda: gradient shape ", grad.sizes(),
                  " differs from its parameter's ", p.sizes());

      const auto dtype = p.scalar_type();
      const bool fused = dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf;
      const auto state_options = fused ? p.options().dtype(at::kFloat) : p.options();
      const auto key = compat::optimizer_state_key(state_, p);
      auto it = state_.find(key);
      if (it == state_.end()) {
        auto st = std::make_unique<AdamWParamState>();
        st->step(0);
        st->exp_avg(at::zeros_like(p, state_options, at::MemoryFormat::Preserve));
        st->exp_avg_sq(at::zeros_like(p, state_options, at::MemoryFormat::Preserve));
        if (o.amsgrad()) st->max_exp_avg_sq(at::zeros_like(p, state_options, at::MemoryFormat::Preserve));
        it = state_.emplace(key, std::move(st)).first;
      }
      auto& st = static_cast<AdamWParamState&>(*it->second);
      if (o.amsgrad() && !st.max_exp_avg_sq().defined())
        st.max_exp_avg_sq(at::zeros_like(p, state_options, at::MemoryFormat::Preserve));
      st.step(st.step() + 1);

      const float* device_step = nullptr;
      if (capturable_ && fused) {
        auto ds = device_steps_.find(p.unsafeGetTensorImpl());
        if (ds == device_steps_.end())
          ds = device_steps_
                   .emplace(p.unsafeGetTensorImpl(),
                            at::full({}, static_cast<double>(st.step() - 1), p.options().dtype(at::kFloat)))
                   .first;
        steps_to_advance.push_back(ds->second);
        device_step = ds->second.data_ptr<float>();
      }
      const double bc1 = 1 - std::pow(beta1, st.step());
      const double bc2 = 1 - std::pow(beta2, st.step());
      if (!fused) {
        ops_update(p, grad, st, o, maximize_, bc1, bc2);
        continue;
      }
      if (p.numel() == 0) continue;

      at::Tensor pw = p;
      if (!p.is_non_overlapping_and_dense()) {
        pw = p.contiguous();
        copy_back.emplace_back(p, pw);
      }
      settle_state(st.exp_avg(), p, pw, "exp_avg");
      settle_state(st.exp_avg_sq(), p, pw, "exp_avg_sq");
      if (o.amsgrad()) settle_state(st.max_exp_avg_sq(), p, pw, "max_exp_avg_sq");
      at::Tensor gw = with_layout(grad.scalar_type() == dtype ? grad : grad.to(dtype), pw);
      keep.push_back(gw);

      AdamWTensorArgs a{};
      a.param = pw.data_ptr();
      a.grad = gw.data_ptr();
      a.exp_avg = st.exp_avg().data_ptr<float>();
      a.exp_avg_sq = st.exp_avg_sq().data_ptr<float>();
      a.max_exp_avg_sq = o.amsgrad() ? st.max_exp_avg_sq().data_ptr<float>() : nullptr;
      a.numel = p.numel();
      a.neg_step_size = static_cast<float>(-o.lr() / bc1);
      a.sqrt_bias_correction2 = static_cast<float>(std::sqrt(bc2));
      a.step = device_step;
      batches[{p.get_device(), static_cast<int>(dtype)}].tensors.push_back(a);
    }

    // Device steps advance before the update reads them (same stream, so ordered).
    if (!steps_to_advance.empty()) at::_foreach_add_(steps_to_advance, 1.0);

    AdamWGroupConstants c{};
    c.decay = o.weight_decay() != 0 ? static_cast<float>(1 - o.lr() * o.weight_decay()) : 1.0f;
    c.beta1 = static_cast<float>(beta1);
    c.one_minus_beta1 = static_cast<float>(1 - beta1);
    c.beta2 = static_cast<float>(beta2);
    c.one_minus_beta2 = static_cast<float>(1 - beta2);
    c.eps = static_cast<float>(o.eps());
    c.maximize = maximize_;
    c.lr = o.lr();
    c.beta1_d = beta1;
    c.beta2_d = beta2;
    for (auto& [where, batch] : batches) {
      const auto device_index = static_cast<c10::DeviceIndex>(where.first);
      c10::cuda::CUDAGuard guard(device_index);
      const int err = launch_fused_adamw(kernel_dtype(static_cast<at::ScalarType>(where.second)), c,
                                         batch.tensors.data(), batch.tensors.size(),
                                         at::cuda::getCurrentCUDAStream(device_index).stream());
      TORCH_CHECK(err == 0, "FusedAdamWCuda: kernel launch failed: ", fused_adamw_error_string(err));
    }
  }
  for (auto& [dst, src] : copy_back) dst.copy_(src);
  return loss;
}

}  // namespace accelkit::cuda
