// The CUDA plugin: every GPU the driver shows, usable where LibTorch here has CUDA. Loads on
// any machine (the driver and NVML are dlopen()ed); entry points are noexcept (CachedProbePlugin).
#include <accelkit/sdk/plugin.hpp>
#include <accelkit/sdk/support/cached_probe.hpp>

#include "cuda_device.hpp"
#include "cuda_probe.hpp"
#include "cuda_report.hpp"
#include "torch_cuda_status.hpp"

namespace accelkit::cuda {

struct CudaFacts {
  CudaProbe probe;
  CudaReport report;
};

class CudaPlugin final : public support::CachedProbePlugin<CudaFacts> {
 public:
  static constexpr const char* kName = "cuda";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "CUDA: driver and NVML loaded at run time, bf16/TF32/fp16 by architecture, fused AdamW, graph capture";
  CudaPlugin() : CachedProbePlugin(kName) {}

 private:
  Probed run_probe() override {
    CudaProbe probe = probe_cuda();
    CudaReport report = make_cuda_report(probe, torch_cuda_status());
    ProbeReport out;
    out.score = report.score;
    out.devices = report.devices;
    out.reasons = report.reasons;
    out.warnings = report.warnings;
    return {CudaFacts{std::move(probe), std::move(report)}, std::move(out)};
  }

  Result<std::shared_ptr<Device>> open_device(const CudaFacts& facts, std::size_t index) override {
    const auto& r = facts.report;
    if (index >= r.devices.size())
      return Status(StatusCode::invalid_argument, "no device cuda:" + std::to_string(index) + " (the driver shows " +
                                                      std::to_string(r.devices.size()) + ")");
    if (!r.usable[index])
      return Status(StatusCode::unavailable,
                    r.devices[index].id + " cannot be used: " +
                        (r.devices[index].warnings.empty() ? (r.reasons.empty() ? std::string("unknown") : r.reasons.front())
                                                           : r.devices[index].warnings.front()));
    return std::shared_ptr<Device>(
        std::make_shared<CudaDevice>(facts.probe.gpus[index], r.devices[index], facts.probe.nvml_error));
  }
};

}  // namespace accelkit::cuda

ACCELKIT_PLUGIN(accelkit::cuda::CudaPlugin)
