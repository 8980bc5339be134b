#include "format.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace accelkit::cli {

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string human_bytes(std::uint64_t bytes) {
  if (bytes == 0) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string flop_rate(double tflops) {
  if (tflops >= 1) return fixed(tflops, 2) + " TFLOP/s";
  char buf[64];
  if (tflops >= 1e-3) std::snprintf(buf, sizeof buf, "%.3g GFLOP/s", tflops * 1e3);
  else std::snprintf(buf, sizeof buf, "%.3g MFLOP/s", tflops * 1e6);
  return buf;
}

std::vector<std::string> capability_names(const CapabilitySet& caps) {
  std::vector<std::string> out;
  for (auto c : caps.typed) out.emplace_back(to_string(c));
  for (const auto& [k, v] : caps.extra) out.push_back(k + "=" + v);
  return out;
}

}  // namespace accelkit::cli
