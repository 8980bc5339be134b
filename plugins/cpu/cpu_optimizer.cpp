#include "cpu_optimizer.hpp"

#include "accelkit/sdk/support/adamw_state.hpp"

#include <ATen/Parallel.h>

#include "accelkit/sdk/support/aten_fused_adamw.hpp"
#include "fused_adamw.hpp"
#include "fused_sgd.hpp"

namespace accelkit::cpu {
namespace {

constexpr const char* kAten = "aten-fused";

std::string threads_text() {
  const int n = at::get_num_threads();
  return std::to_string(n) + (n == 1 ? " thread" : " threads");
}

std::string own_name() { return std::string("fused-") + adamw_isa_name(adamw_default_isa()); }

}  // namespace

std::string CpuOptimizer::implementation() const {
  return std::string("fused AdamW (") + adamw_isa_name(adamw_default_isa()) + ", " + threads_text() + ")";
}

std::vector<AdamWImplementation> CpuOptimizer::adamw_implementations() const {
  std::vector<AdamWImplementation> out{{own_name(), implementation(), true}};
  if (support::AtenFusedAdamW::available(c10::DeviceType::CPU))
    out.push_back({kAten, "ATen fused AdamW (at::_fused_adamw_, " + threads_text() + ")", false});
  return out;
}

Result<std::shared_ptr<torch::optim::Optimizer>> CpuOptimizer::create_adamw(const std::vector<at::Tensor>& params,
                                                                            const AdamWConfig& c) noexcept {
  const bool aten = c.implementation == kAten;
  if (!aten && !c.implementation.empty() && c.implementation != own_name()) {
    std::string names;
    for (const auto& i : adamw_implementations()) names += (names.empty() ? "" : ", ") + i.name;
    return Status(StatusCode::invalid_argument,
                  "no AdamW implementation '" + c.implementation + "' on the CPU (this LibTorch offers: " + names + ")");
  }
  if (aten && !support::AtenFusedAdamW::available(c10::DeviceType::CPU))
    return Status(StatusCode::not_supported, "at::_fused_adamw_ has CPU kernels from LibTorch 2.4 only");
  if (aten && c.master_weights)
    return Status(StatusCode::not_supported, "at::_fused_adamw_ keeps no fp32 master weights");
  return guarded("cpu fused AdamW", [&]() -> std::shared_ptr<torch::optim::Optimizer> {
    const auto options = support::adamw_options(c);
    if (aten) return std::make_shared<support::AtenFusedAdamW>(params, options, c.maximize);
    return std::make_shared<FusedAdamW>(params, options, c.maximize, c.master_weights);
  });
}

Result<std::shared_ptr<torch::optim::Optimizer>> CpuOptimizer::create_sgd(const std::vector<at::Tensor>& params,
                                                                          const SGDConfig& c) noexcept {
  return guarded("cpu fused SGD", [&]() -> std::shared_ptr<torch::optim::Optimizer> {
    auto o = torch::optim::SGDOptions(c.lr).momentum(c.momentum).dampening(c.dampening).weight_decay(c.weight_decay).nesterov(
        c.nesterov);
    // SGD's own checks (Nesterov needs momentum and no dampening) come from its constructor.
    return std::make_shared<FusedSGD>(params, o);
  });
}

}  // namespace accelkit::cpu
