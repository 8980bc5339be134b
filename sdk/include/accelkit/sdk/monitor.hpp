// Monitor: telemetry for one device. A missing or unreadable sensor is a Reading without a
// value and with a note saying why ("n/a: no hwmon sensor"), never an error.
//
// Thread-safety: sample() is called from one thread at a time (a sampler thread, say).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "accelkit/sdk/status.hpp"

namespace accelkit {

// Well-known keys; a plugin may add its own.
namespace reading {
inline constexpr const char* temperature_c = "temperature_c";
inline constexpr const char* power_w = "power_w";
inline constexpr const char* power_limit_w = "power_limit_w";
inline constexpr const char* utilisation_pct = "utilisation_pct";
inline constexpr const char* memory_used_bytes = "memory_used_bytes";
inline constexpr const char* memory_total_bytes = "memory_total_bytes";
inline constexpr const char* clock_mhz = "clock_mhz";
inline constexpr const char* memory_clock_mhz = "memory_clock_mhz";
// The temperature at which the device starts to slow itself down (NVML's slowdown threshold,
// hwmon temp*_max or temp*_crit): the thermal guard's default threshold.
inline constexpr const char* temperature_limit_c = "temperature_limit_c";
// 1 while the device runs slower than it could for its own protection (thermal or power
// limits), 0 when not; the note says why ("HW thermal slowdown, SW power cap"). Unit "bool".
inline constexpr const char* throttled = "throttled";
}  // namespace reading

struct Reading {
  std::string key;              // reading::temperature_c, ...
  std::optional<double> value;  // nullopt = n/a
  std::string unit;             // "C", "W", "%", "bytes", "MHz"
  std::string source;           // where it came from ("hwmon k10temp Tccd1", "RAPL package-0")
  std::string note;             // why it is n/a, or a caveat
};

class Monitor {
 public:
  virtual ~Monitor() = default;
  // One sample of every reading this device has. Rates (power from energy counters,
  // utilisation from tick counters) are deltas since the previous sample: n/a on the first.
  virtual Result<std::vector<Reading>> sample() noexcept = 0;
};

}  // namespace accelkit
