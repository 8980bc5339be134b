// What Device::memory() reports for one Intel GPU. Torch-free, so the tests check it on the
// fixtures:
//   - LibTorch's XPU caching allocator, where the plugin can read it (LibTorch has XPU and its
//     device-generic memory API, 2.13+): this process's tensors (in_use), their high-water
//     mark (peak) and what the allocator holds (reserved). The module reads them and passes them in.
//   - the device's memory for every process: i915's lmem_total_bytes / lmem_avail_bytes, else
//     Level Zero Sysman's memory modules (free / size).
// Without the allocator, in_use, peak and reserved stay nullopt and the source says why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <accelkit/sdk/memory.hpp>
#include <accelkit/sdk/status.hpp>

#include "xpu_probe.hpp"

namespace accelkit::xpu {

struct AllocatorFigures {
  std::uint64_t allocated = 0;
  std::uint64_t peak = 0;
  std::uint64_t reserved = 0;
};

// `device`: the id the messages name ("xpu:0"). `sysman`: a Sysman reading taken now, nullopt
// when Level Zero is not loaded. Status(unavailable), naming what is missing, when there are no
// allocator figures and no device-wide ones either.
Result<MemoryStats> xpu_memory(const std::string& device, const XpuGpu& gpu, const std::optional<SysmanReading>& sysman,
                               const std::optional<AllocatorFigures>& allocator, const std::string& no_allocator);

}  // namespace accelkit::xpu
