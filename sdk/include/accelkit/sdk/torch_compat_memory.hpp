// Counting the tensor memory a region allocates, through LibTorch's own memory reporting (what
// its profiler's profile_memory uses): while a TensorMemoryMeter lives, every CPU tensor
// allocation and release on this thread (and the autograd engine's, which carries the thread's
// debug info) is reported to it. Exact and free of the allocator's and the kernel's noise,
// unlike the resident set: memory that glibc keeps after a free is reused without the RSS
// moving, so an RSS difference misses it.
//
// The reporting interface's totals are int64_t in LibTorch 1.13 and size_t from 2.0; the type
// is taken from the interface itself here, so no version test is needed.
//
// Releases of tensors allocated before the meter started are not reported (LibTorch does not
// know their size); such a release may make LibTorch log "Memory block of unknown size" once.
// Thread-safety: one meter per thread at a time; the counts are atomic.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

namespace accelkit::compat {

namespace detail {
template <typename F>
struct report_total;
template <typename C, typename R, typename P, typename S, typename T, typename U, typename D>
struct report_total<R (C::*)(P, S, T, U, D)> {
  using type = T;
};
}  // namespace detail

// int64_t (1.13) or size_t (2.x).
using ReportedTotal = detail::report_total<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>::type;

class TensorMemoryMeter {
 public:
  explicit TensorMemoryMeter(c10::DeviceType type = c10::DeviceType::CPU)
      : counter_(std::make_shared<Counter>(type)), guard_(c10::DebugInfoKind::PROFILER_STATE, counter_) {}
  // Bytes allocated and not released since the meter started (negative: more released than
  // allocated), and the most that was at any moment.
  std::int64_t live() const noexcept { return counter_->live.load(); }
  std::int64_t peak() const noexcept { return counter_->peak.load(); }

 private:
  struct Counter : c10::MemoryReportingInfoBase {
    explicit Counter(c10::DeviceType t) : type(t) {}
    void reportMemoryUsage(void*, std::int64_t size, ReportedTotal, ReportedTotal, c10::Device device) override {
      if (device.type() != type) return;
      const std::int64_t now = live.fetch_add(size) + size;
      std::int64_t seen = peak.load();
      while (now > seen && !peak.compare_exchange_weak(seen, now)) {
      }
    }
    bool memoryProfilingEnabled() const override { return true; }
    c10::DeviceType type;
    std::atomic<std::int64_t> live{0};
    std::atomic<std::int64_t> peak{0};
  };
  std::shared_ptr<Counter> counter_;
  c10::DebugInfoGuard guard_;
};

}  // namespace accelkit::compat
