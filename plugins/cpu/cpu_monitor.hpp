// accelkit::Monitor for the CPU: temperature (hwmon / x86_pkg_temp) and where the CPU starts
// to protect itself (temp*_max / _crit), package power (RAPL), utilisation (/proc/stat), memory
// (/proc/meminfo) and, where the kernel counts them (x86's thermal_throttle counters), whether
// the CPU throttled itself since the previous sample. Sensors are found at construction,
// through sysfs_path()/procfs_path(); a missing one reads as n/a with a note.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <optional>
#include <vector>

#include <accelkit/sdk/monitor.hpp>

#include "accelkit/sdk/support/host_file.hpp"
#include "proc_stat.hpp"
#include "rapl.hpp"
#include "temperature.hpp"

namespace accelkit::cpu {

class CpuMonitor final : public Monitor {
 public:
  using Clock = std::chrono::steady_clock;

  // `read` defaults to host::read_file; tests inject errors root cannot provoke (EACCES).
  explicit CpuMonitor(host::FileReader read = {});

  Result<std::vector<Reading>> sample() noexcept override;
  // sample() at a given time: rates are deltas over `now` minus the previous sample's `now`.
  Result<std::vector<Reading>> sample_at(Clock::time_point now) noexcept;

  const std::optional<TemperatureSource>& temperature_source() const noexcept { return temperature_; }

 private:
  std::vector<Reading> sample_unchecked(Clock::time_point now);

  host::FileReader read_;
  std::optional<TemperatureSource> temperature_;
  RaplMeter rapl_;
  std::optional<CpuTicks> previous_ticks_;
  // cpu*/thermal_throttle/{core,package}_throttle_count, and their sum at the previous sample.
  std::vector<std::string> throttle_counters_;
  std::optional<std::int64_t> previous_throttles_;
};

}  // namespace accelkit::cpu
