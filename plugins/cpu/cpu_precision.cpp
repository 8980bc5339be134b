#include "cpu_precision.hpp"

#include <ATen/Parallel.h>
#include <accelkit/torch_compat.hpp>

#include "precision_rules.hpp"

namespace accelkit::cpu {

Result<PrecisionPlan> CpuPrecision::plan(const PrecisionRequest& request) noexcept {
  return capture("cpu precision plan", [&] { return plan_cpu_precision(request, probe_); });
}

Status CpuPrecision::apply(const PrecisionPlan& plan) noexcept {
  return capture("cpu precision apply", [&]() -> Status {
    if (plan.dtype != "fp32" && plan.dtype != "bf16")
      return Status(StatusCode::not_supported,
                    "the CPU device runs fp32 or bf16, not '" + plan.dtype + "'");
    if (plan.tf32)
      return Status(StatusCode::not_supported, "TF32 is not a CPU feature");
    if (plan.threads < 0)
      return Status(StatusCode::invalid_argument, "threads must be >= 0");
    if (plan.threads > 0) at::set_num_threads(plan.threads);
    const bool autocast = plan.autocast && plan.dtype == "bf16";
    if (autocast) compat::set_autocast_dtype(at::kCPU, at::kBFloat16);
    compat::set_autocast_enabled(at::kCPU, autocast);
    return Status::ok();
  });
}

Result<std::vector<AppliedValue>> CpuPrecision::read_back() noexcept {
  return capture("cpu precision read_back", [] {
    return std::vector<AppliedValue>{
        {"num_threads", std::to_string(at::get_num_threads())},
        {"num_interop_threads", std::to_string(at::get_num_interop_threads())},
        {"autocast_cpu_enabled", compat::autocast_enabled(at::kCPU) ? "true" : "false"},
        {"autocast_cpu_dtype", c10::toString(compat::autocast_dtype(at::kCPU))},
    };
  });
}

}  // namespace accelkit::cpu
