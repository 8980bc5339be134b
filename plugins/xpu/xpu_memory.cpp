#include "xpu_memory.hpp"

namespace accelkit::xpu {

Result<MemoryStats> xpu_memory(const std::string& device, const XpuGpu& gpu, const std::optional<SysmanReading>& sysman,
                               const std::optional<AllocatorFigures>& allocator, const std::string& no_allocator) {
  MemoryStats s;
  std::string wide;  // where the device-wide figures came from
  const LmemReading lmem = gpu.card ? read_lmem(*gpu.card) : LmemReading{};
  if (lmem.total && lmem.available) {
    s.total = lmem.total;
    s.available = lmem.available;
    wide = gpu.card->driver + " " + lmem.source + " (" + gpu.card->card_dir + ")";
  } else if (sysman && sysman->memory_size) {
    s.total = sysman->memory_size;
    s.available = sysman->memory_free;
    wide = "Level Zero Sysman memory modules (free, size)";
  } else if (gpu.memory_bytes() > 0) {
    s.total = gpu.memory_bytes();
  }
  std::string missing = gpu.integrated() ? "an integrated GPU: its memory is the host's"
                                         : "no free-memory figure from the driver or Level Zero Sysman";
  if (!lmem.problem.empty()) missing += "; " + lmem.problem;

  if (allocator) {
    s.in_use = allocator->allocated;
    s.peak = allocator->peak;
    s.reserved = allocator->reserved;
    s.source = "LibTorch's XPU caching allocator (allocated, peak, reserved)" + (wide.empty() ? "" : "; " + wide);
    s.note = "this process's tensors on " + device + "; reserved is what the allocator holds, tensors and cache";
    if (wide.empty()) s.note += "; " + missing;
    return s;
  }
  if (!s.available)
    return Status(StatusCode::unavailable,
                  device + ": no memory figures: none from an allocator (" + no_allocator + ") and " + missing);
  s.source = wide + "; no allocator figures: " + no_allocator;
  s.note = "the device's memory for every process: this process's tensors and their peak are unknown without "
           "LibTorch's allocator";
  return s;
}

}  // namespace accelkit::xpu
