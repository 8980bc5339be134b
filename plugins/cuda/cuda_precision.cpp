#include "cuda_precision.hpp"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <accelkit/sdk/torch_compat.hpp>

namespace accelkit::cuda {

Result<PrecisionPlan> CudaPrecision::plan(const PrecisionRequest& request) noexcept {
  return guarded("cuda precision plan", [&] { return plan_cuda_precision(request, cc_); });
}

Status CudaPrecision::apply(const PrecisionPlan& plan) noexcept {
  return guarded("cuda precision apply", [&]() -> Status {
    if (plan.tf32 && cc_.value() < 80)
      return Status(StatusCode::not_supported, "TF32 needs SM 8.0; this device is SM " + cc_.str());
    if (plan.threads < 0) return Status(StatusCode::invalid_argument, "threads must be >= 0");
    if (plan.threads > 0) at::set_num_threads(plan.threads);
    auto& ctx = at::globalContext();
    ctx.setAllowTF32CuBLAS(plan.tf32);
    ctx.setAllowTF32CuDNN(plan.tf32);
    const bool autocast = plan.autocast && plan.dtype != Dtype::fp32;
    if (autocast) compat::set_autocast_dtype(at::kCUDA, plan.dtype == Dtype::bf16 ? at::kBFloat16 : at::kHalf);
    compat::set_autocast_enabled(at::kCUDA, autocast);
    return Status::ok();
  });
}

Result<std::vector<AppliedValue>> CudaPrecision::read_back() noexcept {
  return guarded("cuda precision read_back", [] {
    const auto& ctx = at::globalContext();
    std::vector<AppliedValue> out{
        {"allow_tf32_cublas", ctx.allowTF32CuBLAS() ? "true" : "false", PlanField::tf32},
        {"allow_tf32_cudnn", ctx.allowTF32CuDNN() ? "true" : "false", PlanField::tf32},
        {"autocast_cuda_enabled", compat::autocast_enabled(at::kCUDA) ? "true" : "false", PlanField::autocast},
        {"autocast_cuda_dtype", c10::toString(compat::autocast_dtype(at::kCUDA)), PlanField::autocast_dtype},
        {"num_threads", std::to_string(at::get_num_threads()), PlanField::threads},
    };
    if (compat::kSdpaControllable) {
      const auto b = compat::sdpa_backends();
      out.push_back({"sdpa_flash_enabled", b.flash ? "true" : "false"});
      out.push_back({"sdpa_mem_efficient_enabled", b.mem_efficient ? "true" : "false"});
      out.push_back({"sdpa_math_enabled", b.math ? "true" : "false"});
    } else {
      out.push_back({"sdpa", "n/a (LibTorch before 2.0 has no SDPA controls)"});
    }
    return out;
  });
}

}  // namespace accelkit::cuda
