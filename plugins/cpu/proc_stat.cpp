#include "proc_stat.hpp"

#include <cstdlib>
#include <string>

namespace accelkit::cpu {

std::optional<CpuTicks> parse_proc_stat(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string line(text.substr(pos, nl - pos));
    pos = nl + 1;
    if (line.compare(0, 4, "cpu ") != 0) continue;
    // user nice system idle iowait irq softirq steal guest guest_nice
    std::uint64_t f[8] = {};
    const char* p = line.c_str() + 4;
    int n = 0;
    for (; n < 8; ++n) {
      char* end = nullptr;
      unsigned long long v = std::strtoull(p, &end, 10);
      if (end == p) break;
      f[n] = v;
      p = end;
    }
    if (n < 4) return std::nullopt;
    CpuTicks t;
    t.busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    t.total = t.busy + f[3] + f[4];
    return t;
  }
  return std::nullopt;
}

std::optional<double> utilisation_pct(const CpuTicks& previous, const CpuTicks& current) {
  if (current.total <= previous.total || current.busy < previous.busy) return std::nullopt;
  const double total = static_cast<double>(current.total - previous.total);
  return 100.0 * static_cast<double>(current.busy - previous.busy) / total;
}

}  // namespace accelkit::cpu
