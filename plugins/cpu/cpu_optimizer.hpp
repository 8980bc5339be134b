// The CPU plugin's Optimizer: its own FusedAdamW (one vectorised, parallel pass per element)
// and, where this LibTorch has CPU kernels for it (2.4+), LibTorch's at::_fused_adamw_; the
// host times both and keeps the faster. Its FusedSGD (fused_sgd.hpp) for SGD programs.
#pragma once

#include "accelkit/sdk/optimizer.hpp"

namespace accelkit::cpu {

class CpuOptimizer final : public Optimizer {
 public:
  std::string implementation() const override;
  std::vector<AdamWImplementation> adamw_implementations() const override;
  Result<std::shared_ptr<torch::optim::Optimizer>> create_adamw(const std::vector<at::Tensor>& params,
                                                                const AdamWConfig& config) noexcept override;
  Result<std::shared_ptr<torch::optim::Optimizer>> create_sgd(const std::vector<at::Tensor>& params,
                                                              const SGDConfig& config) noexcept override;
};

}  // namespace accelkit::cpu
