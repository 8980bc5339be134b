#include "cpu_precision.hpp"

#include <ATen/Parallel.h>
#include <accelkit/sdk/torch_compat.hpp>

#include "openblas_kernels.hpp"
#include "operator_kernels.hpp"
#include "precision_rules.hpp"

namespace accelkit::cpu {

Result<PrecisionPlan> CpuPrecision::plan(const PrecisionRequest& request) noexcept {
  return guarded("cpu precision plan", [&]() -> Result<PrecisionPlan> {
    Result<PrecisionPlan> plan = plan_cpu_precision(request, probe_);
    if (!plan.ok()) return plan;
    PrecisionPlan p = plan.value();
    const BlasKernelPlan blas = plan_openblas_kernels(request.blas, openblas_state(), probe_.isa, probe_.vendor);
    p.blas_kernels = blas.kernels;
    p.reasons.push_back(blas.reason);
    std::string why;
    Result<std::vector<std::string>> ops = plan_operator_kernels(request.kernels, probe_.isa, why);
    if (!ops.ok()) return ops.status();
    p.kernels = ops.value();
    p.reasons.push_back(why);
    return p;
  });
}

Status CpuPrecision::apply(const PrecisionPlan& plan) noexcept {
  return guarded("cpu precision apply", [&]() -> Status {
    if (plan.dtype == Dtype::fp16)
      return Status(StatusCode::not_supported, "the CPU device runs fp32 or bf16, not fp16");
    if (plan.tf32)
      return Status(StatusCode::not_supported, "TF32 is not a CPU feature");
    if (plan.threads < 0)
      return Status(StatusCode::invalid_argument, "threads must be >= 0");
    // "" (the library's own kernels) also undoes an earlier plan's choice.
    if (std::string err = select_openblas_kernels(plan.blas_kernels); !err.empty())
      return Status(StatusCode::not_supported, "blas kernels '" + plan.blas_kernels + "': " + err);
    if (plan.threads > 0 && at::get_num_threads() != plan.threads) at::set_num_threads(plan.threads);
    const bool autocast = plan.autocast && plan.dtype == Dtype::bf16;
    if (autocast) compat::set_autocast_dtype(at::kCPU, at::kBFloat16);
    compat::set_autocast_enabled(at::kCPU, autocast);
    return Status::ok();
  });
}

namespace {

// The convolution shapes timed so far: "3 by the GEMM path, 2 by the Winograd path (4 confirmed
// by a second round), 5 by LibTorch's kernel (1 after a second round), 1 being timed".
std::string convolution_shapes_text() {
  const conv_choice::Table::Counts c = convolution_shapes();
  std::string s = std::to_string(c.gemm) + " by the GEMM path";
  if (c.winograd > 0) s += ", " + std::to_string(c.winograd) + " by the Winograd path";
  if (c.confirmed > 0) s += " (" + std::to_string(c.confirmed) + " confirmed by a second round)";
  s += ", " + std::to_string(c.libtorch) + " by LibTorch's kernel";
  if (c.dropped > 0) s += " (" + std::to_string(c.dropped) + " after a second round)";
  if (c.trying > 0) s += ", " + std::to_string(c.trying) + " being timed";
  return s;
}

}  // namespace

Result<std::vector<AppliedValue>> CpuPrecision::read_back() noexcept {
  return guarded("cpu precision read_back", [this] {
    const std::string blas = openblas_current_kernels();
    return std::vector<AppliedValue>{
        {"num_threads", std::to_string(at::get_num_threads()), PlanField::threads},
        {"num_interop_threads", std::to_string(at::get_num_interop_threads())},
        {"autocast_cpu_enabled", compat::autocast_enabled(at::kCPU) ? "true" : "false", PlanField::autocast},
        {"autocast_cpu_dtype", c10::toString(compat::autocast_dtype(at::kCPU)), PlanField::autocast_dtype},
        {"blas_kernels", blas.empty() ? "none (no OpenBLAS)" : blas, PlanField::blas_kernels},
        // What runs fp32 matmuls ("MKL", "OpenBLAS SkylakeX"): the library, with the kernels above.
        {"blas", blas_in_use(probe_.blas, blas)},
        {"kernel_calls.max_pool2d_with_indices", std::to_string(operator_kernel_calls("max_pool2d_with_indices"))},
        {"kernel_calls.max_pool2d_with_indices_backward",
         std::to_string(operator_kernel_calls("max_pool2d_with_indices_backward"))},
        {"kernel_calls.convolution_backward", std::to_string(operator_kernel_calls("convolution_backward"))},
        {"kernel_calls.convolution", std::to_string(operator_kernel_calls("convolution"))},
        {"kernel_calls.native_batch_norm", std::to_string(operator_kernel_calls("native_batch_norm"))},
        {"kernel_calls.native_batch_norm_backward", std::to_string(operator_kernel_calls("native_batch_norm_backward"))},
        {"kernel_calls.bernoulli_.float", std::to_string(operator_kernel_calls("bernoulli_.float"))},
        {"convolution_shapes", convolution_shapes_text()},
    };
  });
}

std::vector<OperatorKernel> CpuPrecision::kernels() noexcept {
  try {
    return operator_kernels(probe_.isa);
  } catch (...) {
    return {};
  }
}

}  // namespace accelkit::cpu
