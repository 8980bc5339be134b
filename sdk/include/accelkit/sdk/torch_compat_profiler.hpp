// LibTorch's profiler as accelkit::Trace (core/memory/src/trace.cpp) drives it: one session records
// the operations of the thread that starts it (and the threads LibTorch hands its work to),
// then writes a Chrome trace with LibTorch's own writer and returns the ranges and allocations
// it recorded. Apart from torch_compat.hpp because only the trace needs the profiler's headers.
//
//   Kineto:  where LibTorch was built with it (the PyTorch wheels; distribution builds often
//            are not: Debian 12's 1.13 is not), from 2.2, whose KinetoEvent has ns timestamps.
//            Whether it was is seen at run time: libkineto's entry point in the process.
//            prepareProfiler + enableProfiler(ProfilerState::KINETO), disableProfiler() ->
//            ProfilerResult: events() (operations; "[memory]" events with nBytes, negative for
//            a free), save(path) writes the trace. Device kernels too, on CUDA (and ROCm).
//   legacy:  the autograd profiler every LibTorch has (enableProfilerLegacy, then
//            disableProfilerLegacy's per-thread lists of LegacyEvent: push / pop matched by
//            handle, memory_alloc), written by RecordProfile's writer
//            (writeProfilerEventsToStream). That writer does not escape names, so they are
//            JSON-escaped first. Host operations only: no device kernels.
//
// Both share the process: one session at a time per thread, and none while another profiler
// (a Python one, say) is on in this thread - ProfilerSession refuses to start then.
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/Context.h>
#include <c10/core/Device.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include "accelkit/sdk/torch_compat.hpp"

#define ACCELKIT_HAS_KINETO_API ACCELKIT_TORCH_AT_LEAST(2, 2)

#if ACCELKIT_HAS_KINETO_API
#include <torch/csrc/autograd/profiler_kineto.h>
#endif

namespace accelkit::compat {

// One operation, user scope or device kernel: [start_ns, end_ns) on `thread` of `where`
// ("cpu": a host thread; "cuda:0": a stream of that device). One clock per session.
struct ProfiledRange {
  std::string name;
  std::string where;
  std::uint64_t thread = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

// An allocation (bytes > 0) or a free (bytes < 0) of `where`'s memory, made by host thread
// `thread` at `at_ns` (same clock as the ranges).
struct ProfiledAlloc {
  std::string where;
  std::uint64_t thread = 0;
  std::int64_t at_ns = 0;
  std::int64_t bytes = 0;
};

struct ProfiledRun {
  std::vector<ProfiledRange> ranges;
  std::vector<ProfiledAlloc> allocs;
};

// Whether this process's LibTorch has Kineto (and accelkit its API for this version): the
// symbol of libkineto's entry point, linked into libtorch_cpu where it was built with it. Found
// in the process's global scope, where a program that links LibTorch has it.
inline bool kineto_available() {
  if (!ACCELKIT_HAS_KINETO_API) return false;
  static const bool found = ::dlsym(RTLD_DEFAULT, "_ZN9libkineto3apiEv") != nullptr;
  return found;
}

// Whether a LibTorch profiler is on in this thread (accelkit's or anyone's).
inline bool profiler_on() { return torch::profiler::impl::profilerEnabled(); }

// A name as JSON string content: quotes, backslashes and control characters escaped.
inline std::string json_escaped(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

class ProfilerSession {
 public:
  enum class Kind { kineto, legacy };

  // Starts recording on this thread: Kineto where the process has it (unless `prefer_legacy`),
  // else the legacy profiler. `memory`: allocations too; `device`: device kernels where the
  // profiler records them (Kineto on a CUDA build). Throws c10::Error.
  ProfilerSession(bool memory, bool device, bool prefer_legacy = false)
      : kind_(!prefer_legacy && kineto_available() ? Kind::kineto : Kind::legacy) {
    using torch::profiler::impl::ProfilerConfig;
    using torch::profiler::impl::ProfilerState;
    TORCH_CHECK(!profiler_on(), "a LibTorch profiler is already on in this thread");
    const ProfilerConfig config(kind_ == Kind::kineto ? ProfilerState::KINETO : ProfilerState::CPU,
                                /*report_input_shapes=*/false, /*profile_memory=*/memory);
    if (kind_ == Kind::legacy) {
      (void)device;
      torch::autograd::profiler::enableProfilerLegacy(config);
    } else {
#if ACCELKIT_HAS_KINETO_API
      using torch::profiler::impl::ActivityType;
      std::set<ActivityType> activities{ActivityType::CPU};
      if (device && at::hasCUDA()) activities.insert(ActivityType::CUDA);
      torch::autograd::profiler::prepareProfiler(config, activities);
      torch::autograd::profiler::enableProfiler(config, activities);
#endif
    }
    on_ = true;
  }

  // Stops a session that was not finished, dropping what it recorded (this thread only).
  ~ProfilerSession() {
    if (!on_) return;
    try {
      if (kind_ == Kind::legacy) {
        torch::autograd::profiler::disableProfilerLegacy();
      } else {
#if ACCELKIT_HAS_KINETO_API
        torch::autograd::profiler::disableProfiler();
#endif
      }
    } catch (const std::exception&) {
      // Nothing to report to: the events are dropped either way.
    }
  }
  ProfilerSession(const ProfilerSession&) = delete;
  ProfilerSession& operator=(const ProfilerSession&) = delete;

  // Forgets the session without stopping it: for a thread that did not start it (LibTorch's
  // profiler state is the starting thread's; it stays on there).
  void abandon() { on_ = false; }

  Kind kind() const { return kind_; }
  const char* profiler() const {
    return kind_ == Kind::kineto ? "Kineto" : "LibTorch's legacy autograd profiler (no Kineto in this LibTorch)";
  }

  // Stops recording (on the thread that started it), writes the Chrome trace to `path` and
  // returns what was recorded. Throws c10::Error (the profiler's, or the file cannot be
  // written).
  ProfiledRun finish(const std::string& path) {
    TORCH_CHECK(on_, "the profiler session has finished already");
    on_ = false;
    return kind_ == Kind::legacy ? finish_legacy(path) : finish_kineto(path);
  }

 private:
  static std::string where_of(c10::DeviceType type, int index) {
    return type == c10::DeviceType::CPU ? "cpu" : c10::Device(type, static_cast<c10::DeviceIndex>(index)).str();
  }

  static ProfiledRun finish_legacy(const std::string& path) {
    using torch::autograd::profiler::EventKind;
    using torch::autograd::profiler::LegacyEvent;
    auto lists = torch::autograd::profiler::disableProfilerLegacy();
    ProfiledRun run;
    std::vector<LegacyEvent*> all;
    const LegacyEvent* origin = nullptr;  // the "__start_profile" mark: time 0
    for (auto& list : lists)
      for (LegacyEvent& e : list) {
        all.push_back(&e);
        if (!origin && e.kind() == EventKind::Mark && std::string(e.name()) == "__start_profile") origin = &e;
      }
    TORCH_CHECK(origin, "the legacy profiler recorded no start mark");
    auto ns = [origin](const LegacyEvent& e) { return static_cast<std::int64_t>(origin->cpuElapsedUs(e) * 1e3); };
    std::unordered_map<at::RecordFunctionHandle, const LegacyEvent*> open;
    for (const LegacyEvent* e : all) {
      if (e->kind() == EventKind::PushRange) {
        open[e->handle()] = e;
      } else if (e->kind() == EventKind::PopRange) {
        auto it = open.find(e->handle());
        if (it == open.end()) continue;
        const LegacyEvent& push = *it->second;
        run.ranges.push_back({push.name(), "cpu", push.threadId(), ns(push), ns(*e)});
        open.erase(it);
      } else if (e->kind() == EventKind::MemoryAlloc) {
        if (e->cpuMemoryUsage() != 0) run.allocs.push_back({"cpu", e->threadId(), ns(*e), e->cpuMemoryUsage()});
        if (e->cudaMemoryUsage() != 0) {
          const std::string where = where_of(c10::DeviceType::CUDA, std::max<int>(0, e->device()));
          run.allocs.push_back({where, e->threadId(), ns(*e), e->cudaMemoryUsage()});
        }
      }
    }
    // RecordProfile's writer puts names into the JSON as they are.
    for (LegacyEvent* e : all)
      if (e->kind() == EventKind::PushRange) {
        std::string escaped = json_escaped(e->name());
        if (escaped != e->name()) e->setName(at::StringView(std::move(escaped)));
      }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    TORCH_CHECK(out, "cannot write ", path);
    torch::autograd::profiler::writeProfilerEventsToStream(out, all);
    out.close();
    TORCH_CHECK(out, "writing ", path, " failed");
    return run;
  }

  static ProfiledRun finish_kineto(const std::string& path) {
    ProfiledRun run;
#if ACCELKIT_HAS_KINETO_API
    auto result = torch::autograd::profiler::disableProfiler();
    TORCH_CHECK(result, "the profiler returned no result");
    for (const auto& e : result->events()) {
      const auto start = static_cast<std::int64_t>(e.startNs());
      if (e.name() == "[memory]") {
        run.allocs.push_back({where_of(e.deviceType(), e.deviceIndex()), e.startThreadId(), start, e.nBytes()});
        continue;
      }
      const bool host = e.deviceType() == c10::DeviceType::CPU;
      run.ranges.push_back({e.name(), where_of(e.deviceType(), e.deviceIndex()),
                            host ? e.startThreadId() : static_cast<std::uint64_t>(e.deviceResourceId()), start,
                            static_cast<std::int64_t>(e.endNs())});
    }
    result->save(path);
#else
    (void)path;
    TORCH_CHECK(false, "no Kineto API for LibTorch ", TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR);
#endif
    return run;
  }

  Kind kind_;
  bool on_ = false;
};

}  // namespace accelkit::compat
