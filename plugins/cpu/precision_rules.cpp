#include "precision_rules.hpp"

#include "device_info.hpp"

namespace accelkit::cpu {

namespace {

// Where bf16 arithmetic is native but no faster than fp32: an Intel core without AMX (Cooper
// Lake, or a Xeon whose hypervisor hides AMX) runs AVX512_BF16's dot products no faster than its
// fp32 FMAs, and autocast adds the conversions. Measured on a 2-core Xeon (family 6 model 207,
// AVX512_BF16, no AMX), 2 threads, LibTorch 2.13: a 2048^3 matmul at 165 GFLOP/s in bf16 against
// 312 in fp32, a 3x3 convolution's forward and backward 1.4x slower, and ResNet-20's training
// step 257 ms under bf16 autocast against 217 ms in fp32. On AMD (Zen 4 and later) the same
// instructions run ResNet-20's step 2x faster than fp32. An unknown vendor keeps bf16.
std::string bf16_not_faster(const CpuProbe& probe) {
  if (probe.isa.amx_bf16 || !probe.isa.avx512_bf16 || probe.vendor != "Intel") return {};
  return "fp32: AVX512_BF16 is present but this Intel CPU has no AMX, and there bf16 arithmetic is no faster than "
         "fp32 (measured on a Xeon without AMX: bf16 matmul at half fp32's rate), so bf16 autocast would add only "
         "conversions (precision = bf16 still asks for it)";
}

}  // namespace

Result<PrecisionPlan> plan_cpu_precision(const PrecisionRequest& req, const CpuProbe& probe) {
  PrecisionPlan plan;
  const std::string bf16 = bf16_source(probe.isa);

  if (!req.precision) {
    if (const std::string slow = bf16_not_faster(probe); !slow.empty()) {
      plan.reasons.push_back(slow);
    } else if (!bf16.empty()) {
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
