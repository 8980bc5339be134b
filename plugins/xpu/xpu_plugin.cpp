// The xpu plugin: Intel GPUs (Arc, Data Center GPU Max and Flex, Core Ultra iGPUs) from the
// i915/xe DRM sysfs and oneAPI Level Zero, usable when LibTorch here has XPU (PyTorch's XPU
// backend, stock since 2.5); otherwise listed, monitored and their memory reported, with score
// 0 and the install hint. It outranks the device-generic torch plugin's view of the same XPU
// devices (score 100 against 5). Nothing from Intel is linked: Level Zero is dlopened.
#include <accelkit/sdk/plugin.hpp>
#include <accelkit/sdk/support/cached_probe.hpp>

#include "xpu_device.hpp"
#include "xpu_report.hpp"
#include "xpu_torch.hpp"

namespace accelkit::xpu {

struct XpuFacts {
  XpuProbe probe;
  XpuReport report;
};

class XpuPlugin final : public support::CachedProbePlugin<XpuFacts> {
 public:
  static constexpr const char* kName = "xpu";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "Intel GPUs (XPU): i915/xe sysfs and Level Zero, per-architecture precision, hwmon and Sysman telemetry";
  XpuPlugin() : CachedProbePlugin(kName) {}

 private:
  Probed run_probe() override {
    XpuProbe probe = probe_xpu();
    XpuReport report = make_xpu_report(probe, detect_torch_xpu());
    ProbeReport out;
    out.score = report.score;
    out.devices = report.devices;
    out.reasons = report.reasons;
    out.warnings = report.warnings;
    return {XpuFacts{std::move(probe), std::move(report)}, std::move(out)};
  }

  Result<std::shared_ptr<Device>> open_device(const XpuFacts& facts, std::size_t index) override {
    const auto& devices = facts.report.devices;
    if (index >= devices.size())
      return Status(StatusCode::invalid_argument, "xpu:" + std::to_string(index) + " does not exist (" +
                                                      std::to_string(devices.size()) + " Intel GPU(s) found)");
    return std::shared_ptr<Device>(std::make_shared<XpuDevice>(facts.probe.gpus[index], devices[index],
                                                               facts.probe.level_zero.sysman,
                                                               facts.report.torch_index[index],
                                                               facts.report.unusable[index]));
  }
};

}  // namespace accelkit::xpu

ACCELKIT_PLUGIN(accelkit::xpu::XpuPlugin)
