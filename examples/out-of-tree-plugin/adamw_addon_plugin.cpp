// adamw_addon: replaces one interface of another plugin's device. It brings no device of its
// own; it contributes SimpleAdamW (simple_adamw.hpp) to whatever CPU device was negotiated
// (the cpu plugin's, say). The host times it beside the device's own AdamW implementations
// and uses the fastest, or this one when asked: adamw_implementation = "adamw_addon.simple".
#include <accelkit/sdk/optimizer.hpp>
#include <accelkit/sdk/plugin.hpp>
#include <accelkit/sdk/support/adamw_state.hpp>

#include <ATen/Parallel.h>

#include "simple_adamw.hpp"

using namespace accelkit;

class AddonOptimizer final : public Optimizer {
 public:
  std::string implementation() const override {
    return "SimpleAdamW (one pass, " + std::to_string(at::get_num_threads()) + " threads)";
  }
  std::vector<AdamWImplementation> adamw_implementations() const override {
    return {AdamWImplementation{"simple", implementation(), false}};
  }
  Result<std::shared_ptr<torch::optim::Optimizer>> create_adamw(const std::vector<at::Tensor>& params,
                                                                const AdamWConfig& c) noexcept override {
    if (c.master_weights) return Status(StatusCode::not_supported, "SimpleAdamW keeps no fp32 master weights");
    return guarded("adamw_addon create_adamw", [&]() -> std::shared_ptr<torch::optim::Optimizer> {
      return std::make_shared<cpu_variant::SimpleAdamW>(params, support::adamw_options(c), c.maximize);
    });
  }
};

class AdamWAddon final : public Plugin {
 public:
  static constexpr const char *kName = "adamw_addon", *kVersion = "0.1.0",
                              *kDescription = "SimpleAdamW for any CPU device (no device of its own)";
  Result<ProbeReport> probe() noexcept override {
    return guarded("adamw_addon probe", [] {
      ProbeReport r;
      r.score = 1;  // usable; it offers no device, so negotiation never picks it
      r.reasons = {"contributes SimpleAdamW to CPU devices"};
      return r;
    });
  }
  Result<std::shared_ptr<Device>> open(std::size_t) noexcept override {
    return Status(StatusCode::invalid_argument, "adamw_addon has no devices");
  }
  Result<std::shared_ptr<Optimizer>> optimizer_for(const DeviceInfo& device) noexcept override {
    if (device.kind != DeviceKind::cpu) return Status(StatusCode::not_supported, "CPU devices only");
    return guarded("adamw_addon optimizer_for", [] { return std::shared_ptr<Optimizer>(std::make_shared<AddonOptimizer>()); });
  }
};

ACCELKIT_PLUGIN(AdamWAddon)
