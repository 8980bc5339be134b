#include "combined_optimizer.hpp"

#include "plugin_call.hpp"

#include <utility>

namespace accelkit {

namespace {

class CombinedOptimizer final : public Optimizer {
 public:
  CombinedOptimizer(std::shared_ptr<Optimizer> own, std::vector<OptimizerContribution> contributed)
      : own_(std::move(own)), contributed_(std::move(contributed)) {}

  std::string implementation() const override {
    if (own_) return own_->implementation();
    const OptimizerContribution& c = contributed_.front();
    return call_plugin(c.plugin + " plugin", "Optimizer::implementation()", [&] { return c.optimizer->implementation(); }) +
           " (from plugin " + c.plugin + ")";
  }

  std::vector<AdamWImplementation> adamw_implementations() const override {
    std::vector<AdamWImplementation> out;
    if (own_) out = own_->adamw_implementations();
    for (const auto& c : contributed_)
      for (AdamWImplementation impl : call_plugin(c.plugin + " plugin", "Optimizer::adamw_implementations()",
                                                  [&] { return c.optimizer->adamw_implementations(); })) {
        impl.name = c.plugin + "." + impl.name;
        impl.description += " (from plugin " + c.plugin + ")";
        out.push_back(std::move(impl));
      }
    return out;
  }

  Result<std::shared_ptr<torch::optim::Optimizer>> create_adamw(const std::vector<at::Tensor>& params,
                                                                const AdamWConfig& config) noexcept override {
    const std::string& name = config.implementation;
    for (const auto& c : contributed_) {
      const std::string prefix = c.plugin + ".";
      if (name.compare(0, prefix.size(), prefix) != 0) continue;
      AdamWConfig theirs = config;
      theirs.implementation = name.substr(prefix.size());
      // Its first implementation is its default: asked for by "" (a plugin listing only the
      // SDK's "default" entry may not know that name).
      std::vector<AdamWImplementation> impls;
      try {
        impls = call_plugin(c.plugin + " plugin", "Optimizer::adamw_implementations()",
                            [&] { return c.optimizer->adamw_implementations(); });
      } catch (const std::exception& e) {
        return Status(StatusCode::internal, e.what());
      }
      if (!impls.empty() && impls.front().name == theirs.implementation) theirs.implementation.clear();
      return c.optimizer->create_adamw(params, theirs);
    }
    if (own_) return own_->create_adamw(params, config);
    // No device optimizer: the first contribution's default.
    if (name.empty()) return contributed_.front().optimizer->create_adamw(params, config);
    return Status(StatusCode::invalid_argument, "no AdamW implementation '" + name + "' on this device");
  }

  // SGD: the device's own; contributions are AdamW implementations.
  Result<std::shared_ptr<torch::optim::Optimizer>> create_sgd(const std::vector<at::Tensor>& params,
                                                              const SGDConfig& config) noexcept override {
    if (own_) return own_->create_sgd(params, config);
    return Status(StatusCode::not_supported, "the device has no optimizer of its own (the other plugins contribute AdamW only)");
  }

 private:
  std::shared_ptr<Optimizer> own_;
  std::vector<OptimizerContribution> contributed_;
};

}  // namespace

std::vector<OptimizerContribution> collect_optimizer_contributions(const Discovery& discovery,
                                                                   const std::string& device_plugin,
                                                                   const DeviceInfo& device,
                                                                   std::vector<std::string>* declined) {
  std::vector<OptimizerContribution> out;
  for (const auto& rec : discovery.plugins) {
    if (!rec.plugin || rec.status != PluginStatus::usable || rec.name == device_plugin) continue;
    auto offered = rec.plugin->optimizer_for(device);
    if (offered.ok() && offered.value()) {
      out.push_back({rec.name, offered.value()});
    } else if (declined && !(offered.ok() || offered.status().code() == StatusCode::not_supported)) {
      declined->push_back(rec.name + ": its optimizer for " + device.id + " failed: " + offered.status().message());
    }
  }
  return out;
}

std::shared_ptr<Optimizer> combine_optimizers(std::shared_ptr<Optimizer> own,
                                              std::vector<OptimizerContribution> contributed) {
  return std::make_shared<CombinedOptimizer>(std::move(own), std::move(contributed));
}

}  // namespace accelkit
