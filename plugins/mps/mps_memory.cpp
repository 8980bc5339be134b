#include "mps_memory.hpp"

#include <string>

namespace accelkit::mps {
namespace {

constexpr const char* kNoFigures =
    "this LibTorch has no MPS allocator figures (LibTorch's MPS hooks report them from 2.0)";
constexpr const char* kNoEmptyCache = "this LibTorch's MPS hooks have no emptyCache() (from LibTorch 2.0)";
constexpr const char* kNoMps =
    "LibTorch here runs no MPS (it needs macOS 12.3+ on a Mac with a Metal GPU and a LibTorch built with MPS)";

}  // namespace

MemoryStats mps_memory_stats(const compat::MpsAllocatorFigures& f, std::uint64_t memsize) {
  MemoryStats s;
  s.in_use = f.current_allocated;
  s.reserved = f.driver_allocated;
  s.source = "LibTorch's MPS allocator (getCurrentAllocatedMemory";
  if (f.driver_allocated) s.source += ", getDriverAllocatedMemory";
  s.note = "this process's tensors on mps:0; reserved is all Metal holds for the process (the tensors, the "
           "allocator's cache, MPS's own buffers)";
  if (f.recommended_max && *f.recommended_max > 0) {
    s.total = f.recommended_max;
    s.source += ", getRecommendedMaxMemory)";
    if (s.reserved) s.available = *s.reserved < *s.total ? *s.total - *s.reserved : 0;
    s.note += "; total is the working set Metal recommends for the GPU, available that less reserved (other "
              "processes not counted)";
  } else {
    s.source += ")";
    if (memsize > 0) {
      s.total = memsize;
      s.source += "; sysctl hw.memsize";
    }
    s.note += "; available unknown: this LibTorch does not report Metal's recommended working set";
  }
  s.note += "; no peak: LibTorch's MPS hooks keep none";
  return s;
}

bool mps_memory_available() noexcept {
  try {
    return compat::mps_allocator_figures_available && compat::mps_available();
  } catch (...) {
    return false;
  }
}

Result<MemoryStats> read_mps_memory(std::uint64_t memsize) noexcept {
  return guarded("mps memory", [&]() -> Result<MemoryStats> {
    if (!compat::mps_allocator_figures_available) return Status(StatusCode::not_supported, kNoFigures);
    if (!compat::mps_available()) return Status(StatusCode::unavailable, kNoMps);
    return mps_memory_stats(compat::mps_allocator_figures(), memsize);
  });
}

Status empty_mps_cache() noexcept {
  return guarded("mps empty_cache", [&]() -> Status {
    if (!compat::mps_empty_cache_available) return Status(StatusCode::not_supported, kNoEmptyCache);
    if (!compat::mps_available()) return Status(StatusCode::unavailable, kNoMps);
    compat::mps_empty_cache();
    return Status::ok();
  });
}

Status reset_mps_peak() noexcept {
  return Status(StatusCode::not_supported, "LibTorch's MPS hooks keep no peak to reset");
}

}  // namespace accelkit::mps
