// accelkit::Precision for one NVIDIA GPU: plan() applies plan_cuda_precision; apply() sets
// TF32 for cuBLAS and cuDNN through LibTorch's global context and CUDA autocast with the
// planned dtype; read_back() reads those back, plus the SDPA backend switches.
#pragma once

#include <accelkit/sdk/precision.hpp>

#include "arch_rules.hpp"

namespace accelkit::cuda {

class CudaPrecision final : public Precision {
 public:
  explicit CudaPrecision(ComputeCapability cc) : cc_(cc) {}

  Result<PrecisionPlan> plan(const PrecisionRequest& request) noexcept override;
  Status apply(const PrecisionPlan& plan) noexcept override;
  Result<std::vector<AppliedValue>> read_back() noexcept override;

 private:
  ComputeCapability cc_;
};

}  // namespace accelkit::cuda
