// /proc/meminfo: total and available memory.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace accelkit::cpu {

struct MemInfo {
  std::uint64_t total_bytes = 0;  // MemTotal; 0 = not found
  // MemAvailable, or MemFree + Buffers + Cached on kernels older than 3.14.
  std::optional<std::uint64_t> available_bytes;
  // A figure that cannot be memory (kB x 1024 wraps, or above 64 TiB), as found:
  // "implausible: MemTotal 18014398509481985 kB". Such a figure is left out above.
  std::string implausible;
};

MemInfo parse_meminfo(std::string_view text);

// The "Key: N kB" lines of a procfs text (/proc/meminfo, /proc/<pid>/status) in bytes; lines
// without a number are skipped, a figure that cannot be memory is left out and the first one
// named in `implausible`.
std::map<std::string, std::uint64_t> parse_kb_lines(std::string_view text, std::string& implausible);

}  // namespace accelkit::cpu
