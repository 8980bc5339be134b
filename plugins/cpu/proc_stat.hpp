// CPU utilisation from the aggregate "cpu" line of /proc/stat (ticks since boot).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace accelkit::cpu {

struct CpuTicks {
  std::uint64_t busy = 0;   // user+nice+system+irq+softirq+steal (guest is inside user)
  std::uint64_t total = 0;  // busy + idle + iowait
};

std::optional<CpuTicks> parse_proc_stat(std::string_view text);

// Percent busy between two snapshots; nullopt when no tick elapsed or the counters reset.
std::optional<double> utilisation_pct(const CpuTicks& previous, const CpuTicks& current);

}  // namespace accelkit::cpu
