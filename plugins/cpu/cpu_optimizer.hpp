// The CPU plugin's Optimizer: FusedAdamW (one vectorised, parallel pass per element).
#pragma once

#include "accelkit/optimizer.hpp"

namespace accelkit::cpu {

class CpuOptimizer final : public Optimizer {
 public:
  std::string implementation() const override;
  Result<std::shared_ptr<torch::optim::Optimizer>> create_adamw(const std::vector<at::Tensor>& params,
                                                                const AdamWConfig& config) noexcept override;
};

}  // namespace accelkit::cpu
