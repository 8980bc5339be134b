#include "cuda_optimizer.hpp"

#include "accelkit/sdk/support/adamw_state.hpp"

#include "fused_adamw_cuda.hpp"

namespace accelkit::cuda {

std::string CudaOptimizer::implementation() const {
  return "fused multi-tensor AdamW (CUDA, cuda:" + std::to_string(device_index_) + ")";
}

std::vector<AdamWImplementation> CudaOptimizer::adamw_implementations() const {
  return {AdamWImplementation{"default", implementation(), /*master_weights=*/true}};
}

Result<std::shared_ptr<torch::optim::Optimizer>> CudaOptimizer::create_adamw(const std::vector<at::Tensor>& params,
                                                                             const AdamWConfig& c) noexcept {
  return guarded("cuda fused AdamW", [&]() -> std::shared_ptr<torch::optim::Optimizer> {
    for (const auto& p : params)
      TORCH_CHECK(p.is_cuda(), "the CUDA fused AdamW takes CUDA parameters; got one on ", p.device(),
                  " (move the model to the device first)");
    const auto options = support::adamw_options(c);
    return std::make_shared<FusedAdamWCuda>(params, options, c.maximize, c.master_weights);
  });
}

}  // namespace accelkit::cuda
