#include "cuda_optimizer.hpp"

#include "accelkit/sdk/support/adamw_state.hpp"
#include "accelkit/sdk/support/aten_fused_sgd.hpp"

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

Result<std::shared_ptr<torch::optim::Optimizer>> CudaOptimizer::create_sgd(const std::vector<at::Tensor>& params,
                                                                           const SGDConfig& c) noexcept {
  if (!support::AtenFusedSGD::available(c10::DeviceType::CUDA))
    return Status(StatusCode::not_supported, "this LibTorch's at::_fused_sgd_ has no CUDA kernels (LibTorch >= 2.3 has)");
  return guarded("cuda fused SGD", [&]() -> std::shared_ptr<torch::optim::Optimizer> {
    for (const auto& p : params)
      TORCH_CHECK(p.is_cuda(), "the CUDA fused SGD takes CUDA parameters; got one on ", p.device(),
                  " (move the model to the device first)");
    // SGD's own checks (Nesterov needs momentum and no dampening) come from its constructor.
    return std::make_shared<support::AtenFusedSGD>(
        params, torch::optim::SGDOptions(c.lr).momentum(c.momentum).dampening(c.dampening).weight_decay(c.weight_decay).nesterov(
                    c.nesterov));
  });
}

}  // namespace accelkit::cuda
