// What Device::memory() reports for one AMD GPU. Torch-free, so the tests check it on the
// fixture trees:
//   - LibTorch's HIP caching allocator, where the plugin can read it (LibTorch is a ROCm build,
//     the plugin was built against its c10_hip and LibTorch sees the GPU): this process's
//     tensors (in_use), their high-water mark (peak) and what the allocator holds (reserved).
//     The module reads them (rocm_torch.hpp) and passes them in.
//   - amdgpu sysfs, always: the card's VRAM (total, mem_info_vram_total) and what no process
//     holds (available: total less mem_info_vram_used, which counts every process).
// Without the allocator, in_use, peak and reserved stay nullopt and the source says why; the
// sysfs figures then need both files (the total alone says no more than DeviceInfo does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <accelkit/sdk/memory.hpp>
#include <accelkit/sdk/status.hpp>

#include "amdgpu_card.hpp"

namespace accelkit::rocm {

// LibTorch's HIP caching allocator on one device, all pools together, in bytes.
struct AllocatorFigures {
  std::uint64_t allocated = 0;  // live tensors
  std::uint64_t peak = 0;       // the most allocated since the last resetPeakStats (or the start)
  std::uint64_t reserved = 0;   // held by the allocator: the live tensors and its cache
};

// `device`: the id the messages name ("rocm:0"). `card`: the GPU's amdgpu directory, nullopt
// when only KFD shows it. `allocator`: nullopt where there are no allocator figures, and
// `no_allocator` says why ("LibTorch here is not a ROCm build"). Status(unavailable), naming
// what is missing, when there are no allocator figures and the VRAM files cannot be read.
Result<MemoryStats> rocm_memory(const std::string& device, const std::optional<AmdgpuCard>& card,
                                const std::optional<AllocatorFigures>& allocator, const std::string& no_allocator);

}  // namespace accelkit::rocm
