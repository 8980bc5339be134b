#include "arch_rules.hpp"

#include <algorithm>

namespace accelkit::cuda {

ArchFeatures arch_features(ComputeCapability cc, int torch_major) {
  const int v = cc.value();
  const bool torch2 = torch_major >= 2;
  ArchFeatures f;
  f.fp16_tensor_cores = v >= 70;
  f.tf32 = v >= 80;
  f.bf16 = v >= 80;
  f.fp8 = v >= 89;
  f.sdpa_flash = torch2 && v >= 80;
  f.sdpa_mem_efficient = torch2 && v >= 50;
  return f;
}

bool kernel_runs_on(const std::vector<int>& archs, ComputeCapability cc) {
  if (archs.empty()) return false;
  const int v = cc.value();
  for (int a : archs)
    if (a / 10 == cc.major && a <= v) return true;
  return v >= *std::max_element(archs.begin(), archs.end());
}

Result<PrecisionPlan> plan_cuda_precision(const PrecisionRequest& req, ComputeCapability cc) {
  PrecisionPlan plan;
  const int v = cc.value();
  const std::string sm = "SM " + cc.str();
  if (!req.precision) {
    if (v >= 80) {
      plan.dtype = Dtype::bf16;
      plan.autocast = true;
      plan.reasons.push_back("bf16 autocast: " + sm + " has bf16 tensor cores and fp32's exponent range");
    } else if (v >= 70) {
      plan.dtype = Dtype::fp16;
      plan.autocast = true;
      plan.reasons.push_back("fp16 autocast: " + sm + " has fp16 tensor cores but no bf16 ones");
    } else {
      plan.reasons.push_back("fp32: " + sm + " has no tensor cores (fp16 autocast would not be faster)");
    }
  } else {
    switch (*req.precision) {
      case Dtype::fp32:
        plan.reasons.push_back("fp32: requested");
        break;
      case Dtype::bf16:
        if (v < 53)
          return Status(StatusCode::not_supported, "bf16 is not supported by LibTorch on " + sm + "; use fp32");
        plan.dtype = Dtype::bf16;
        plan.autocast = true;
        plan.reasons.push_back(v >= 80 ? "bf16 autocast: requested; " + sm + " has bf16 tensor cores"
                                       : "warning: bf16 autocast requested on " + sm +
                                             ", which has no bf16 tensor cores: it is emulated and usually "
                                             "slower than fp32 (fp16 is the fast type here)");
        break;
      case Dtype::fp16:
        if (v < 53)
          return Status(StatusCode::not_supported, "fp16 arithmetic needs SM 5.3 or newer; this device is " + sm);
        plan.dtype = Dtype::fp16;
        plan.autocast = true;
        plan.reasons.push_back(v >= 70 ? "fp16 autocast: requested; " + sm + " has fp16 tensor cores"
                                       : "warning: fp16 autocast requested on " + sm +
                                             ", which has no tensor cores: expect little or no speed-up");
        break;
    }
  }

  switch (req.tf32) {
    case Toggle::automatic:
      plan.tf32 = v >= 80;
      plan.reasons.push_back(plan.tf32 ? "tf32: on for fp32 matmul and cuDNN convolution (" + sm + " has TF32)"
                                       : "tf32: off (" + sm + " has no TF32; it needs SM 8.0)");
      break;
    case Toggle::on:
      if (v < 80)
        return Status(StatusCode::not_supported,
                      "TF32 needs SM 8.0 (Ampere) or newer; this device is " + sm + " (use tf32 = \"auto\" or \"off\")");
      plan.tf32 = true;
      plan.reasons.push_back("tf32: on (requested)");
      break;
    case Toggle::off:
      plan.reasons.push_back("tf32: off (requested)");
      break;
  }

  plan.loss_scaling = plan.dtype == Dtype::fp16;
  plan.reasons.push_back(plan.loss_scaling ? "loss scaling: dynamic (fp16 gradients underflow without it)"
                                           : std::string("loss scaling: off (") + to_string(plan.dtype) +
                                                 " keeps fp32's exponent range)");
  if (req.threads < 0)
    return Status(StatusCode::invalid_argument,
                  "threads must be >= 0 (0 = LibTorch's default), got " + std::to_string(req.threads));
  plan.threads = req.threads;
  if (req.threads > 0)
    plan.reasons.push_back("threads: " + std::to_string(req.threads) + " CPU threads (requested)");
  return plan;
}

Result<SdpaChoice> plan_sdpa(const std::string& setting, const ArchFeatures& f, ComputeCapability cc) {
  SdpaChoice c;
  const std::string sm = "SM " + cc.str();
  if (setting == "auto") {
    c.flash = f.sdpa_flash;
    c.mem_efficient = f.sdpa_mem_efficient;
    c.reason = std::string("sdpa: ") + (c.flash ? "flash, " : "") + (c.mem_efficient ? "mem_efficient, " : "") +
               "math (every backend " + sm + " and this LibTorch have)";
  } else if (setting == "flash") {
    if (!f.sdpa_flash)
      return Status(StatusCode::not_supported,
                    "flash attention needs SM 8.0 or newer and LibTorch 2.0 or newer; here: " + sm);
    c.flash = true;
    c.reason = "sdpa: flash (requested), math for shapes flash cannot take";
  } else if (setting == "mem_efficient") {
    if (!f.sdpa_mem_efficient)
      return Status(StatusCode::not_supported, "memory-efficient attention needs LibTorch 2.0 or newer");
    c.mem_efficient = true;
    c.reason = "sdpa: mem_efficient (requested), math for shapes it cannot take";
  } else if (setting == "math") {
    c.reason = "sdpa: math only (requested)";
  } else {
    return Status(StatusCode::invalid_argument,
                  "unknown sdpa_backend '" + setting + "' (expected auto, flash, mem_efficient or math)");
  }
  return c;
}

}  // namespace accelkit::cuda
