// accelkit::Precision for the CPU: plan() applies precision_rules, apply() sets LibTorch's
// intra-op threads and CPU autocast, read_back() reads them from LibTorch; kernels() are the
// plugin's own operator kernels (operator_kernels.hpp).
#pragma once

#include <accelkit/sdk/precision.hpp>

#include "probe.hpp"

namespace accelkit::cpu {

class CpuPrecision final : public Precision {
 public:
  explicit CpuPrecision(CpuProbe probe) : probe_(std::move(probe)) {}

  Result<PrecisionPlan> plan(const PrecisionRequest& request) noexcept override;
  Status apply(const PrecisionPlan& plan) noexcept override;
  Result<std::vector<AppliedValue>> read_back() noexcept override;
  std::vector<OperatorKernel> kernels() noexcept override;

 private:
  CpuProbe probe_;
};

}  // namespace accelkit::cpu
