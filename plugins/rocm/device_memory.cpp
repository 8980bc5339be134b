#include "device_memory.hpp"

#include <vector>

namespace accelkit::rocm {

Result<MemoryStats> rocm_memory(const std::string& device, const std::optional<AmdgpuCard>& card,
                                const std::optional<AllocatorFigures>& allocator, const std::string& no_allocator) {
  MemoryStats s;
  std::vector<std::string> problems;  // sysfs figures that could not be read, and why
  std::string sysfs;                  // where the sysfs figures came from; "" = none
  std::string used_text;
  if (card) {
    const VramReading vram = read_vram(*card);
    s.total = vram.total;
    if (vram.total && vram.used) s.available = *vram.used < *vram.total ? *vram.total - *vram.used : 0;
    if (vram.total) sysfs = "amdgpu sysfs " + card->device_dir + " (mem_info_vram_total, mem_info_vram_used)";
    if (vram.used) used_text = std::to_string(*vram.used) + " bytes of VRAM in use by all processes";
    if (!vram.total) problems.push_back("cannot read " + vram.total_path);
    if (!vram.used) problems.push_back("cannot read " + vram.used_path);
  } else {
    problems.push_back(device + " has no amdgpu sysfs directory (only the KFD topology shows it)");
  }
  auto joined = [](const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
    return out;
  };

  if (allocator) {
    s.in_use = allocator->allocated;
    s.peak = allocator->peak;
    s.reserved = allocator->reserved;
    s.source = "LibTorch's HIP caching allocator (allocated, peak, reserved)" + (sysfs.empty() ? "" : "; " + sysfs);
    s.note = "this process's tensors on " + device + "; reserved is what the allocator holds, tensors and cache";
    if (!used_text.empty()) s.note += "; " + used_text;
    if (!problems.empty()) s.note += "; " + joined(problems);
    return s;
  }
  if (!s.available)  // the total alone is DeviceInfo::memory_bytes again: nothing to report
    return Status(StatusCode::unavailable, device + ": no memory figures: none from an allocator (" + no_allocator +
                                               ") and none from sysfs (" + joined(problems) + ")");
  s.source = sysfs + "; no allocator figures: " + no_allocator;
  s.note = "the card's VRAM as the driver counts it, for every process: this process's tensors and their peak are "
           "unknown without LibTorch's allocator";
  if (!used_text.empty()) s.note += "; " + used_text;
  return s;
}

}  // namespace accelkit::rocm
