// The CPU plugin: one device, always usable. Entry points are noexcept (CachedProbePlugin).
#include <ATen/Context.h>
#include <accelkit/sdk/support/qengine.hpp>
#include <accelkit/sdk/plugin.hpp>
#include <accelkit/sdk/support/cached_probe.hpp>

#include "cpu_device.hpp"
#include "device_info.hpp"
#include "probe.hpp"

namespace accelkit::cpu {

namespace {
// LibTorch's quantized engines in this build, lower-cased ("x86", "onednn", ...).
std::vector<std::string> torch_quantized_engines() {
  std::vector<std::string> out;
  for (const c10::QEngine e : at::globalContext().supportedQEngines())
    if (e != c10::QEngine::NoQEngine) out.push_back(support::qengine_name(e));
  return out;
}
}  // namespace

struct CpuFacts {
  CpuProbe probe;
  CpuReport report;
};

class CpuPlugin final : public support::CachedProbePlugin<CpuFacts> {
 public:
  static constexpr const char* kName = "cpu";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "CPU: AVX-512/AMX-aware bf16, RAPL power, hwmon temperature";
  CpuPlugin() : CachedProbePlugin(kName) {}

 private:
  Probed run_probe() override {
    CpuProbe probe = probe_cpu();
    // A LibTorch with MKL linked in (the PyTorch wheel) maps no BLAS library of its own.
    if (probe.blas.kind == BlasKind::not_found && at::hasMKL())
      probe.blas = {BlasKind::mkl, "mkl", "linked into LibTorch", {}};
    probe.quantized_engines = torch_quantized_engines();
    CpuReport report = make_cpu_report(probe);
    ProbeReport out;
    out.score = report.score;
    out.devices.push_back(report.device);
    out.reasons = report.reasons;
    out.warnings = report.warnings;
    return {CpuFacts{std::move(probe), std::move(report)}, std::move(out)};
  }

  Result<std::shared_ptr<Device>> open_device(const CpuFacts& facts, std::size_t index) override {
    if (index != 0)
      return Status(StatusCode::invalid_argument,
                    "the cpu plugin has one device (cpu:0); index " + std::to_string(index) + " does not exist");
    return std::shared_ptr<Device>(std::make_shared<CpuDevice>(facts.probe, facts.report.device));
  }
};

}  // namespace accelkit::cpu

ACCELKIT_PLUGIN(accelkit::cpu::CpuPlugin)
