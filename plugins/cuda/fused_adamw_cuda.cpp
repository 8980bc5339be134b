#include "fused_adamw_cuda.hpp"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>
#include <map>
#include <tuple>
#include <unordered_set>

#include "accelkit/sdk/support/adamw_state.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "fused_adamw_launch.hpp"

namespace accelkit::cuda {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

// A group's scalars, each rounded to float as the ATen ops in torch::optim::AdamW round them.
AdamWGroupConstants group_constants(const AdamWOptions& o, bool maximize) {
  const auto [beta1, beta2] = o.betas();
  AdamWGroupConstants c{};
  c.decay = o.weight_decay() != 0 ? static_cast<float>(1 - o.lr() * o.weight_decay()) : 1.0f;
  c.beta1 = static_cast<float>(beta1);
  c.one_minus_beta1 = static_cast<float>(1 - beta1);
  c.beta2 = static_cast<float>(beta2);
  c.one_minus_beta2 = static_cast<float>(1 - beta2);
  c.eps = static_cast<float>(o.eps());
  c.maximize = maximize;
  c.lr = o.lr();
  c.beta1_d = beta1;
  c.beta2_d = beta2;
  return c;
}

AdamWDtype kernel_dtype(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return AdamWDtype::bf16;
    case at::kHalf: return AdamWDtype::f16;
    default: return AdamWDtype::f32;
  }
}

// One launch list per (device index, dtype, master weights) within a group: the group's
// constants are shared.
using Batches = std::map<std::tuple<int, int, bool>, std::vector<AdamWTensorArgs>>;

// The kernel's arguments for one prepared parameter: its work buffer, gradient, state and this
// step's host bias corrections. The caller adds the master copy and the device step.
AdamWTensorArgs tensor_args(const support::PreparedParam& prep, const AdamWOptions& o) {
  auto& st = *prep.state;
  AdamWTensorArgs a{};
  a.param = prep.work.data_ptr();
  a.grad = prep.grad.data_ptr();
  a.exp_avg = st.exp_avg().data_ptr<float>();
  a.exp_avg_sq = st.exp_avg_sq().data_ptr<float>();
  a.max_exp_avg_sq = o.amsgrad() ? st.max_exp_avg_sq().data_ptr<float>() : nullptr;
  a.numel = prep.work.numel();
  a.neg_step_size = static_cast<float>(-o.lr() / prep.bc1);
  a.sqrt_bias_correction2 = static_cast<float>(std::sqrt(prep.bc2));
  return a;
}

// The parameter's float step counter on its device (capturable mode), started from the host's
// count before this step on first use.
at::Tensor& device_step_counter(std::unordered_map<const void*, at::Tensor>& counters, const at::Tensor& p,
                                int64_t host_step) {
  auto it = counters.find(p.unsafeGetTensorImpl());
  if (it == counters.end())
    it = counters
             .emplace(p.unsafeGetTensorImpl(),
                      at::full({}, static_cast<double>(host_step - 1), p.options().dtype(at::kFloat)))
             .first;
  return it->second;
}

// One kernel launch list per batch, each on the current stream of its device.
void launch_batches(const Batches& batches, const AdamWGroupConstants& c) {
  for (const auto& [where, tensors] : batches) {
    const auto device_index = static_cast<c10::DeviceIndex>(std::get<0>(where));
    c10::cuda::CUDAGuard guard(device_index);
    const int err = launch_fused_adamw(kernel_dtype(static_cast<at::ScalarType>(std::get<1>(where))), c,
                                       tensors.data(), tensors.size(),
                                       at::cuda::getCurrentCUDAStream(device_index).stream());
    TORCH_CHECK(err == 0, "FusedAdamWCuda: kernel launch failed: ", fused_adamw_error_string(err));
  }
}

}  // namespace

FusedAdamWCuda::FusedAdamWCuda(std::vector<torch::optim::OptimizerParamGroup> param_groups, AdamWOptions defaults,
                               bool maximize, bool master_weights)
    : AdamW(std::move(param_groups), std::move(defaults)), maximize_(maximize), master_weights_(master_weights) {
  if (master_weights_)
    masters_.adopt(param_groups_, "FusedAdamWCuda", [](const at::Tensor& p) { return p.is_cuda(); }, "CUDA tensors");
}

FusedAdamWCuda::FusedAdamWCuda(std::vector<torch::Tensor> params, AdamWOptions defaults, bool maximize,
                               bool master_weights)
    : FusedAdamWCuda({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults), maximize,
                     master_weights) {}

void FusedAdamWCuda::save(torch::serialize::OutputArchive& archive) const {
  AdamW::save(archive);
  masters_.save(param_groups_, archive);
}

void FusedAdamWCuda::load(torch::serialize::InputArchive& archive) {
  AdamW::load(archive);
  if (master_weights_) masters_.load(param_groups_, archive, "FusedAdamWCuda");
}

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
  return std::string("fused multi-tensor AdamW (CUDA") + (capturable_ ? ", capturable" : "") +
         (master_weights_ ? ", bf16 weights + fp32 master)" : ")");
}

torch::Tensor FusedAdamWCuda::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }

  std::vector<at::Tensor> keep;                              // converted grads the launches read
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (param, dense work copy)
  std::unordered_set<const void*> seen;

  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    Batches batches;
    std::vector<at::Tensor> steps_to_advance;

    for (auto& p : group.params()) {
      const auto& grad = p.grad();
      if (!grad.defined()) continue;
      TORCH_CHECK(seen.insert(p.unsafeGetTensorImpl()).second,
                  "FusedAdamWCuda: a parameter appears more than once in the param groups");
      TORCH_CHECK(p.is_cuda() && grad.device() == p.device(), "FusedAdamWCuda: parameter and gradient must be on "
                  "the same CUDA device, got ", p.device(), " and ", grad.device());
      const auto dtype = p.scalar_type();
      const bool fused = dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf;
      support::PreparedParam prep = support::prepare_adamw_param(state_, p, o, maximize_, fused, "FusedAdamWCuda");

      const float* device_step = nullptr;
      if (capturable_ && fused) {
        at::Tensor& counter = device_step_counter(device_steps_, p, prep.state->step());
        steps_to_advance.push_back(counter);
        device_step = counter.data_ptr<float>();
      }
      if (!prep.run_kernel) continue;
      if (prep.copy_back) copy_back.emplace_back(p, prep.work);
      keep.push_back(prep.grad);

      AdamWTensorArgs a = tensor_args(prep, o);
      const bool master = master_weights_ && dtype == at::kBFloat16;
      if (master) {  // the kernel updates the master and writes its bf16 rounding into the param
        a.param = masters_.for_step(p, prep.work, "FusedAdamWCuda").data_ptr<float>();
        a.model_param = prep.work.data_ptr();
      }
      a.step = device_step;
      batches[{p.get_device(), static_cast<int>(dtype), master}].push_back(a);
    }

    // Device steps advance before the update reads them (same stream, so ordered).
    if (!steps_to_advance.empty()) at::_foreach_add_(steps_to_advance, 1.0);
    launch_batches(batches, group_constants(o, maximize_));
  }
  for (auto& [dst, src] : copy_back) dst.copy_(src);
  return loss;
}

}  // namespace accelkit::cuda
