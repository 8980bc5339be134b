#include "cpu_optimizer.hpp"

#include <ATen/Parallel.h>

#include "fused_adamw.hpp"

namespace accelkit::cpu {

std::string CpuOptimizer::implementation() const {
  return std::string("fused AdamW (") + adamw_isa_name(adamw_default_isa()) + ", " +
         std::to_string(at::get_num_threads()) + " threads)";
}

Result<std::shared_ptr<torch::optim::Optimizer>> CpuOptimizer::create_adamw(const std::vector<at::Tensor>& params,
                                                                            const AdamWConfig& c) noexcept {
  return capture("cpu fused AdamW", [&]() -> std::shared_ptr<torch::optim::Optimizer> {
    auto options = torch::optim::AdamWOptions(c.lr)
                       .betas(std::make_tuple(c.beta1, c.beta2))
                       .eps(c.eps)
                       .weight_decay(c.weight_decay)
                       .amsgrad(c.amsgrad);
    return std::make_shared<FusedAdamW>(params, options, c.maximize, c.master_weights);
  });
}

}  // namespace accelkit::cpu
