// The ROCm plugin: AMD GPUs from amdgpu sysfs and the KFD topology, usable when LibTorch here
// is a ROCm build (which exposes them as device type CUDA); otherwise listed, monitored and
// their VRAM reported, with score 0. Entry points are noexcept (CachedProbePlugin).
#include <accelkit/sdk/plugin.hpp>
#include <accelkit/sdk/support/cached_probe.hpp>

#include "device_report.hpp"
#include "rocm_device.hpp"
#include "rocm_monitor.hpp"
#include "rocm_torch.hpp"

namespace accelkit::rocm {

struct RocmFacts {
  RocmProbe probe;
  TorchBackend torch;
  RocmReport report;
};

class RocmPlugin final : public support::CachedProbePlugin<RocmFacts> {
 public:
  static constexpr const char* kName = "rocm";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "AMD GPUs (ROCm): KFD/amdgpu sysfs, per-architecture precision, hwmon telemetry";
  RocmPlugin() : CachedProbePlugin(kName) {}

 private:
  Probed run_probe() override {
    TorchBackend torch = detect_torch_backend();
    ProbeOptions options;
    options.enumerate_hip = torch.rocm_build && torch.device_count > 0;
    RocmProbe probe = probe_rocm(options);
    RocmReport report = make_rocm_report(probe, torch);
    ProbeReport out;
    out.score = report.score;
    out.devices = report.devices;
    out.reasons = report.reasons;
    out.warnings = report.warnings;
    return {RocmFacts{std::move(probe), std::move(torch), std::move(report)}, std::move(out)};
  }

  Result<std::shared_ptr<Device>> open_device(const RocmFacts& facts, std::size_t index) override {
    const auto& devices = facts.report.devices;
    if (index >= devices.size())
      return Status(StatusCode::invalid_argument, "rocm:" + std::to_string(index) + " does not exist (" +
                                                      std::to_string(devices.size()) + " AMD GPU(s) found)");
    const int torch_index = facts.report.torch_index[index];
    const RocmGpu& gpu = facts.probe.gpus[index];
    if (torch_index < 0) {
      // Listed, not usable: the device still monitors; its precision() says why it cannot train.
      const std::string why = facts.torch.rocm_build ? "LibTorch does not see it" : std::string(kNotRocmBuild);
      return std::shared_ptr<Device>(
          std::make_shared<RocmDevice>(gpu, devices[index], -1, std::vector<std::string>{}, why));
    }
    // Before LibTorch first touches the GPU: the environment hipBLASLt reads, the memory fraction.
    std::vector<std::string> activation = activate_arch(gpu.rules, torch_index);
    return std::shared_ptr<Device>(
        std::make_shared<RocmDevice>(gpu, devices[index], torch_index, std::move(activation), ""));
  }
};

}  // namespace accelkit::rocm

ACCELKIT_PLUGIN(accelkit::rocm::RocmPlugin)
