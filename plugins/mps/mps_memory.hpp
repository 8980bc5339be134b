// The MPS device's memory (Device::memory(), reset_peak_memory(), empty_cache()) from LibTorch's
// MPS allocator, through its MPS hooks (what each LibTorch has: torch_compat_mps.hpp):
//   in_use     getCurrentAllocatedMemory(): this process's tensors
//   reserved   getDriverAllocatedMemory(): all Metal holds for the process (the tensors, the
//              allocator's cache and MPS's own buffers)
//   total      getRecommendedMaxMemory(): Metal's recommendedMaxWorkingSetSize, what the GPU
//              should use of the unified memory; hw.memsize where LibTorch does not report it
//   available  total less reserved, where the total is Metal's (other processes not counted)
//   peak       nullopt: the hooks keep no high-water mark, so reset_peak_memory() is not
//              supported
// Portable (LibTorch, no macOS API), so the tests build it on every OS. Where LibTorch runs no
// MPS, or its hooks have no figures, each call returns the reason and throws nothing.
#pragma once

#include <cstdint>

#include <accelkit/sdk/memory.hpp>
#include <accelkit/sdk/status.hpp>
#include <accelkit/sdk/torch_compat_mps.hpp>

namespace accelkit::mps {

// The figures as MemoryStats. `memsize`: hw.memsize (0 = unknown), the total where LibTorch
// does not report Metal's recommended working set.
MemoryStats mps_memory_stats(const compat::MpsAllocatorFigures& figures, std::uint64_t memsize);

// Whether read_mps_memory() reports here: LibTorch runs MPS and its hooks have the figures.
// What Capability::memory_stats is claimed on.
bool mps_memory_available() noexcept;

// This process's MPS memory now. Status(not_supported) where this LibTorch's MPS hooks have no
// allocator figures, Status(unavailable) where LibTorch runs no MPS; both say why.
Result<MemoryStats> read_mps_memory(std::uint64_t memsize) noexcept;
// Gives the allocator's cached buffers back (the hooks' emptyCache()); the same statuses.
Status empty_mps_cache() noexcept;
// not_supported, saying why: the MPS hooks keep no peak.
Status reset_mps_peak() noexcept;

}  // namespace accelkit::mps
