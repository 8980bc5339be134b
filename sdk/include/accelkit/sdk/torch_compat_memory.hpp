// Counting the tensor memory a region allocates, through LibTorch's own memory reporting (what
// its profiler's profile_memory uses): while a TensorMemoryMeter lives, every CPU tensor
// allocation and release on this thread (and the autograd engine's, which carries the thread's
// debug info) is reported to it. Exact and free of the allocator's and the kernel's noise,
// unlike the resident set: memory that glibc keeps after a free is reused without the RSS
// moving, so an RSS difference misses it.
//
// The reporting interface's totals are int64_t in LibTorch 1.13 and size_t from 2.0; the type
// is taken from the interface itself here.
//
// Releases of tensors allocated before the meter started are not reported (LibTorch does not
// know their size). LibTorch's CPU allocator logs such a release ("Memory block of unknown
// size was allocated before the profiling started", the first and every 1000th time): it
// speaks of the profiler's results, which the meter is not, so LibTorch's log is held to
// errors while a meter lives (QuietLibTorchLog, process-wide), and this thread's TORCH_WARN
// warnings are handed on when the meter ends (DeferredWarnings).
// Thread-safety: one meter per thread at a time; the counts are atomic.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/version.h>

namespace accelkit::compat {

namespace detail {
template <typename F>
struct report_total;
template <typename C, typename R, typename P, typename S, typename T, typename U, typename D>
struct report_total<R (C::*)(P, S, T, U, D)> {
  using type = T;
};
}  // namespace detail

// LibTorch's log threshold (c10's own logging, or glog where LibTorch was built with it:
// Debian's 1.13), raised to errors while at least one QuietLibTorchLog lives.
class QuietLibTorchLog {
 public:
  QuietLibTorchLog() {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().users++ == 0) {
      state().saved = threshold();
      threshold() = std::max(threshold(), 2);  // 2: errors and worse
    }
  }
  ~QuietLibTorchLog() {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (--state().users == 0) threshold() = state().saved;
  }
  QuietLibTorchLog(const QuietLibTorchLog&) = delete;
  QuietLibTorchLog& operator=(const QuietLibTorchLog&) = delete;

 private:
  struct State {
    std::mutex mutex;
    int users = 0;
    int saved = 0;
  };
  static State& state() {
    static State s;
    return s;
  }
#ifdef C10_USE_GLOG
  static int& threshold() { return FLAGS_minloglevel; }
#else
  static int& threshold() { return FLAGS_caffe2_log_level; }
#endif
};

// Holds this thread's LibTorch warnings (TORCH_WARN) while it lives and hands them, in order,
// to the handler before it when it ends: a QuietLibTorchLog that outlives it would otherwise
// swallow them (LibTorch's default handler writes them to its log). The handler's process()
// takes a c10::Warning in c10::WarningUtils from 2.0; (location, message, verbatim) in
// c10::Warning before.
class DeferredWarnings final : public c10::WarningHandler {
 public:
#if TORCH_VERSION_MAJOR >= 2
  DeferredWarnings() : previous_(c10::WarningUtils::get_warning_handler()) { c10::WarningUtils::set_warning_handler(this); }
  ~DeferredWarnings() override {
    c10::WarningUtils::set_warning_handler(previous_);
    if (previous_)
      for (const c10::Warning& w : held_) previous_->process(w);
  }
  void process(const c10::Warning& warning) override { held_.push_back(warning); }

 private:
  std::vector<c10::Warning> held_;
#else
  DeferredWarnings() : previous_(c10::Warning::get_warning_handler()) { c10::Warning::set_warning_handler(this); }
  ~DeferredWarnings() override {
    c10::Warning::set_warning_handler(previous_);
    if (previous_)
      for (const Held& w : held_) previous_->process(w.where, w.msg, w.verbatim);
  }
  void process(const c10::SourceLocation& where, const std::string& msg, const bool verbatim) override {
    held_.push_back({where, msg, verbatim});
  }

 private:
  struct Held {
    c10::SourceLocation where;
    std::string msg;
    bool verbatim;
  };
  std::vector<Held> held_;
#endif

 public:
  DeferredWarnings(const DeferredWarnings&) = delete;
  DeferredWarnings& operator=(const DeferredWarnings&) = delete;

 private:
  c10::WarningHandler* previous_;
};

// int64_t (1.13) or size_t (2.x).
using ReportedTotal = detail::report_total<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>::type;

class TensorMemoryMeter {
 public:
  explicit TensorMemoryMeter(c10::DeviceType type = c10::DeviceType::CPU)
      : counter_(std::make_shared<Counter>(type)),
        guard_(c10::DebugInfoKind::PROFILER_STATE, counter_) {}
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
  // Declared first, so they outlive the reporting (the log's line comes with a release under
  // it); warnings_ before quiet_, so that the warnings are handed on with the threshold back.
  DeferredWarnings warnings_;
  QuietLibTorchLog quiet_;
  std::shared_ptr<Counter> counter_;
  c10::DebugInfoGuard guard_;
};

}  // namespace accelkit::compat
