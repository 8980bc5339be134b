// The CUDA plugin's Optimizer: FusedAdamWCuda and LibTorch's fused SGD (built only with a CUDA
// LibTorch).
#pragma once

#include <accelkit/sdk/optimizer.hpp>

namespace accelkit::cuda {

class CudaOptimizer final : public Optimizer {
 public:
  explicit CudaOptimizer(int device_index) : device_index_(device_index) {}
  std::string implementation() const override;
  std::vector<AdamWImplementation> adamw_implementations() const override;
  Result<std::shared_ptr<torch::optim::Optimizer>> create_adamw(const std::vector<at::Tensor>& params,
                                                                const AdamWConfig& config) noexcept override;
  // LibTorch's at::_fused_sgd_ (support::AtenFusedSGD) where this LibTorch has its CUDA kernels.
  Result<std::shared_ptr<torch::optim::Optimizer>> create_sgd(const std::vector<at::Tensor>& params,
                                                              const SGDConfig& config) noexcept override;

 private:
  int device_index_;
};

}  // namespace accelkit::cuda
