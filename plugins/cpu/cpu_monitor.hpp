// accelkit::Monitor for the CPU: temperature (hwmon / x86_pkg_temp), package power (RAPL),
// utilisation (/proc/stat) and memory (/proc/meminfo). Sensors are found at construction,
// through sysfs_path()/procfs_path(); a missing one reads as n/a with a note.
#pragma once

#include <chrono>
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
};

}  // namespace accelkit::cpu
