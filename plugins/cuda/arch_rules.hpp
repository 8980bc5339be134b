// What an NVIDIA architecture can do and which precision it should train in - pure functions
// of the compute capability and the LibTorch version, so they are tested without a GPU.
//
//   FP16 tensor cores from SM 7.0; TF32 and BF16 from 8.0; FP8 from 8.9;
//   flash SDPA on SM >= 8.0 and memory-efficient SDPA on SM >= 5.0, both with LibTorch >= 2.0.
//   Precision: >= 8.0 -> bf16 autocast + TF32; 7.x -> fp16 autocast + loss scaling; older -> fp32.
#pragma once

#include <string>
#include <vector>

#include <accelkit/sdk/precision.hpp>

namespace accelkit::cuda {

struct ComputeCapability {
  int major = 0, minor = 0;
  int value() const noexcept { return major * 10 + minor; }  // 9.0 -> 90
  std::string str() const { return std::to_string(major) + "." + std::to_string(minor); }
};

struct ArchFeatures {
  bool fp16_tensor_cores = false;
  bool tf32 = false;
  bool bf16 = false;
  bool fp8 = false;
  bool sdpa_flash = false;
  bool sdpa_mem_efficient = false;
};

ArchFeatures arch_features(ComputeCapability cc, int torch_major);

// Whether a kernel built with SASS for `archs` (e.g. {80, 90}) and PTX for the highest of
// them runs on `cc`: SASS for sm_XY runs on X.Y..X.9; PTX compute_XY is JIT-compiled on >= X.Y.
bool kernel_runs_on(const std::vector<int>& archs, ComputeCapability cc);

// CUDA precision rules; an explicit request the device cannot honour is refused.
Result<PrecisionPlan> plan_cuda_precision(const PrecisionRequest& request, ComputeCapability cc);

// Which SDPA backends to enable for the sdpa_backend setting (auto | flash | mem_efficient |
// math). auto enables every backend the device has (LibTorch then picks the fastest that
// fits); a named one enables it and math (the fallback for shapes it cannot take) and is
// refused where the device or LibTorch lacks it.
struct SdpaChoice {
  bool flash = false, mem_efficient = false, math = true;
  std::string reason;
};
Result<SdpaChoice> plan_sdpa(const std::string& setting, const ArchFeatures& features, ComputeCapability cc);

}  // namespace accelkit::cuda
