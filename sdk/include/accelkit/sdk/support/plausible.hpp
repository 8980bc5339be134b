// Physical plausibility of what sensors and host files report. A driver bug, a fixture, a
// wrapped counter or a unit mix-up can produce any number; a value outside what the quantity
// can physically be is shown as "n/a (implausible: <raw>)" and never used for a decision.
//
// The host screens every Monitor reading with check() whatever the plugin did; plugins use the
// same helpers at the source (kib_to_bytes for /proc/meminfo, say) so that their own decisions
// never rest on such a value either. Header-only, no state, thread-safe. Since ABI 5.0.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace accelkit::plausible {

// What one quantity can physically be, inclusive.
struct Range {
  double min;
  double max;
};

inline constexpr double kMaxTemperatureC = 150;            // silicon is destroyed before that
inline constexpr double kMinTemperatureC = -40;            // the coldest a running machine is rated for
inline constexpr double kMaxPowerW = 2000;                 // per device: the largest accelerators draw ~1.2 kW
inline constexpr std::uint64_t kMaxMemoryBytes = std::uint64_t{64} << 40;  // 64 TiB per device or host
inline constexpr double kMaxClockMhz = 10000;              // 10 GHz

// The range of a Reading's unit ("C", "W", "bytes", "MHz", "%", "bool"); nullopt for a unit without
// one (the value is then only required to be finite).
inline std::optional<Range> range_for(std::string_view unit) noexcept {
  if (unit == "C") return Range{kMinTemperatureC, kMaxTemperatureC};
  if (unit == "W") return Range{0, kMaxPowerW};
  if (unit == "bytes") return Range{0, static_cast<double>(kMaxMemoryBytes)};
  if (unit == "MHz") return Range{0, kMaxClockMhz};
  if (unit == "%") return Range{0, 100};
  if (unit == "bool") return Range{0, 1};
  return std::nullopt;
}

// "%g" of a value, for messages.
inline std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "" when `value` is a plausible amount of `unit`, else why not:
// "implausible: 1e+07 C (outside -40..150 C)".
inline std::string check(double value, std::string_view unit) {
  const std::string raw = number(value) + (unit.empty() ? "" : " " + std::string(unit));
  if (!std::isfinite(value)) return "implausible: " + raw;
  const auto r = range_for(unit);
  if (!r || (value >= r->min && value <= r->max)) return {};
  return "implausible: " + raw + " (outside " + number(r->min) + ".." + number(r->max) + " " + std::string(unit) + ")";
}

// A /proc/meminfo "kB" figure as bytes; nullopt when the multiplication would wrap or the
// result exceeds kMaxMemoryBytes ("MemTotal: 18014398509481985 kB" is not 1 KiB of memory).
inline std::optional<std::uint64_t> kib_to_bytes(std::uint64_t kib) noexcept {
  if (kib > kMaxMemoryBytes / 1024) return std::nullopt;
  return kib * 1024;
}

// A byte count of memory, or nullopt above kMaxMemoryBytes.
inline std::optional<std::uint64_t> memory_bytes(std::uint64_t bytes) noexcept {
  if (bytes > kMaxMemoryBytes) return std::nullopt;
  return bytes;
}

// A monotonic counter's step from `before` to `now`; nullopt when it went backwards (a wrap or
// a reset: no rate can be computed from that pair).
inline std::optional<std::uint64_t> counter_step(std::uint64_t before, std::uint64_t now) noexcept {
  if (now < before) return std::nullopt;
  return now - before;
}

}  // namespace accelkit::plausible
