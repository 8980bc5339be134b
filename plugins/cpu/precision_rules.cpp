#include "precision_rules.hpp"

#include "device_info.hpp"

namespace accelkit::cpu {

Result<PrecisionPlan> plan_cpu_precision(const PrecisionRequest& req, const CpuProbe& probe) {
  PrecisionPlan plan;
  const std::string bf16 = bf16_source(probe.isa);

  if (!req.precision) {
    if (!bf16.empty()) {
      plan.dtype = Dtype::bf16;
      plan.autocast = true;
      plan.reasons.push_back("bf16 autocast: " + bf16 + " present, bf16 matmul runs natively");
    } else {
      plan.reasons.push_back(
          "fp32: no AVX512_BF16 or AMX-BF16, so bf16 would be emulated and slower than fp32");
    }
  } else {
    switch (*req.precision) {
      case Dtype::fp32:
        plan.reasons.push_back("fp32: requested");
        break;
      case Dtype::bf16:
        plan.dtype = Dtype::bf16;
        plan.autocast = true;
        if (!bf16.empty())
          plan.reasons.push_back("bf16 autocast: requested; " + bf16 + " present");
        else
          plan.reasons.push_back(
              "warning: bf16 autocast requested without AVX512_BF16 or AMX-BF16: bf16 is emulated "
              "in software here and usually slower than fp32");
        break;
      case Dtype::fp16:
        return Status(StatusCode::not_supported,
                      "fp16 is not supported on the CPU device (LibTorch's CPU autocast has no fast "
                      "fp16 path); use bf16 or fp32");
    }
  }

  if (req.tf32 == Toggle::on)
    return Status(StatusCode::not_supported,
                  "TF32 is an NVIDIA tensor-core mode; the CPU device has none (use tf32 = "
                  "\"auto\" or \"off\")");
  plan.tf32 = false;
  plan.reasons.push_back("tf32: off (not a CPU feature)");

  plan.loss_scaling = false;
  if (plan.dtype == Dtype::bf16)
    plan.reasons.push_back("loss scaling: off (bf16 has fp32's exponent range)");

  if (req.threads < 0) {
    return Status(StatusCode::invalid_argument,
                  "threads must be >= 0 (0 = one per physical core), got " +
                      std::to_string(req.threads));
  } else if (req.threads > 0) {
    plan.threads = req.threads;
    plan.reasons.push_back("threads: " + std::to_string(req.threads) + " (requested)");
  } else if (probe.physical_cores > 0) {
    plan.threads = probe.physical_cores;
    plan.reasons.push_back("threads: " + std::to_string(probe.physical_cores) +
                           " (one per physical core; SMT siblings share the vector units)");
  } else {
    plan.reasons.push_back("threads: LibTorch's default (physical core count unknown)");
  }
  return plan;
}

}  // namespace accelkit::cpu
