// Device memory through the contract (Device::memory(), Device::reset_peak_memory(); since
// ABI 7.0): what a program, MemoryScope, `bench` and `report` read about a device's memory.
// Every field may be unknown (nullopt) - a plugin fills what its device can say and names
// where the figures come from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace accelkit {

struct MemoryStats {
  // Bytes in use by this process on the device: LibTorch's caching allocator's live tensors
  // (CUDA, ROCm, MPS), or the process's resident set (CPU: tensors and everything else).
  std::optional<std::uint64_t> in_use;
  // The high-water mark of in_use since the last reset_peak_memory() (or the process start).
  std::optional<std::uint64_t> peak;
  // Held by the allocator in all, in_use included (CUDA, ROCm: LibTorch's caching allocator's
  // reserved bytes; MPS: what Metal holds for the process); nullopt where there is no cache.
  // Its presence says the device counts an allocator of its own (the batch-size finder then
  // searches with real out-of-memory trials).
  std::optional<std::uint64_t> reserved;
  std::optional<std::uint64_t> total;      // the device's memory
  std::optional<std::uint64_t> available;  // free for new allocations now (all processes)
  std::string source;  // "LibTorch CUDA caching allocator; NVML", "/proc/self/status; /proc/meminfo"
  std::string note;    // what the figures mean or leave out ("resident set: not tensors alone")
};

}  // namespace accelkit
