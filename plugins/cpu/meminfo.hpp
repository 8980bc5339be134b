// /proc/meminfo: total and available memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace accelkit::cpu {

struct MemInfo {
  std::uint64_t total_bytes = 0;  // MemTotal; 0 = not found
  // MemAvailable, or MemFree + Buffers + Cached on kernels older than 3.14.
  std::optional<std::uint64_t> available_bytes;
};

MemInfo parse_meminfo(std::string_view text);

}  // namespace accelkit::cpu
