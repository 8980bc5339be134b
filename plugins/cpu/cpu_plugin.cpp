// The CPU plugin: one device, always usable. Entry points are noexcept and wrapped in capture().
#include <mutex>
#include <optional>

#include <ATen/Context.h>
#include <accelkit/plugin.hpp>

#include "cpu_device.hpp"
#include "device_info.hpp"
#include "probe.hpp"

namespace accelkit::cpu {

class CpuPlugin final : public Plugin {
 public:
  static constexpr const char* kName = "cpu";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "CPU: AVX-512/AMX-aware bf16, RAPL power, hwmon temperature";

  Result<ProbeReport> probe() noexcept override {
    return capture("cpu probe", [&] {
      std::lock_guard<std::mutex> lock(mutex_);
      return probe_locked();
    });
  }

  Result<std::shared_ptr<Device>> open(std::size_t index) noexcept override {
    return capture("cpu open", [&]() -> Result<std::shared_ptr<Device>> {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!last_) probe_locked();
      if (index != 0)
        return Status(StatusCode::invalid_argument,
                      "the cpu plugin has one device (cpu:0); index " + std::to_string(index) +
                          " does not exist");
      return std::shared_ptr<Device>(std::make_shared<CpuDevice>(last_->probe, last_->report.device));
    });
  }

 private:
  struct Last {
    CpuProbe probe;
    CpuReport report;
  };

  ProbeReport probe_locked() {
    CpuProbe probe = probe_cpu();
    // A LibTorch with MKL linked in (the PyTorch wheel) maps no BLAS library of its own.
    if (probe.blas.kind == BlasKind::not_found && at::hasMKL())
      probe.blas = {BlasKind::mkl, "mkl", "linked into LibTorch", {}};
    CpuReport report = make_cpu_report(probe);
    ProbeReport out;
    out.score = report.score;
    out.devices.push_back(report.device);
    out.reasons = report.reasons;
    out.warnings = report.warnings;
    last_ = Last{std::move(probe), std::move(report)};
    return out;
  }

  std::mutex mutex_;
  std::optional<Last> last_;
};

}  // namespace accelkit::cpu

ACCELKIT_PLUGIN(accelkit::cpu::CpuPlugin)
