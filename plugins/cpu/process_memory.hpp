// The CPU device's memory (Device::memory()): this process's resident set and its peak from
// /proc/self/status (VmRSS, VmHWM), the machine's total and available memory from
// /proc/meminfo; the peak is reset by writing "5" to /proc/self/clear_refs (Linux 4.0+).
// Paths through procfs_path(), so tests point them at fixtures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <accelkit/sdk/memory.hpp>
#include <accelkit/sdk/status.hpp>

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::cpu {

struct ProcStatusMemory {
  std::optional<std::uint64_t> rss_bytes;   // VmRSS
  std::optional<std::uint64_t> peak_bytes;  // VmHWM
};

// The VmRSS and VmHWM lines of a /proc/<pid>/status text (kB); a missing or malformed line
// leaves its field nullopt.
ProcStatusMemory parse_proc_status_memory(std::string_view text);

// The CPU's MemoryStats now; `read` defaults to host::read_file.
MemoryStats read_process_memory(const host::FileReader& read = {});

// Starts a new VmHWM (writes "5" to /proc/self/clear_refs); the reason when it cannot.
Status reset_process_peak();

}  // namespace accelkit::cpu
