// accelkit::Trace: a Chrome / Perfetto trace of a stretch of a program through LibTorch's own
// profiler, and the operations that took the time and the memory in it:
//
//   accelkit::Trace trace;
//   trace.start({"steps.json"});            // checks the file can be written, starts the profiler
//   for (int i = 0; i < 5; ++i) {
//     accelkit::profile_scope scope("step");  // a labelled range in the trace
//     train_step();
//   }
//   accelkit::TraceSummary s = trace.stop();  // writes steps.json (open in https://ui.perfetto.dev)
//   s.top_by_self_time[0].name                // "aten::addmm", ...
//
// The profiler: Kineto where the process's LibTorch has it (the PyTorch wheels; LibTorch >= 2.2),
// else LibTorch's legacy autograd profiler (Debian's 1.13, LibTorch built without Kineto), whose
// trace holds host operations only (TraceSummary::profiler says which). Either way the file is
// LibTorch's own Chrome trace JSON. accelkit adds nothing to the run: LibTorch records the
// operations (aten::mm, autograd nodes, profile_scope ranges) and, with TraceOptions::memory,
// every allocation and free.
//
// The tables are computed from those records, per (name, where) - `where` is "cpu" for host
// operations, the device ("cuda:0") for kernels Kineto saw run there:
//   - self time: a range's duration less the ranges nested in it on the same thread or stream
//     (nesting read from the times, as PyTorch's key_averages does). Exact to the profiler's
//     clock; the profiler's own overhead falls mostly in the self time of the ranges that
//     call many small operations.
//   - total: summed over calls; a call nested in a call of the same name counts in both.
//   - memory: each allocation is charged to the innermost operation running on the thread
//     that made it (bytes allocated; net = allocated - freed in that operation), what PyTorch
//     shows as self CPU / device memory. Memory the allocator caches is not seen again: on a
//     GPU the caching allocator reports the blocks it hands out, not cudaMalloc calls.
//     Allocations outside every recorded range are left out of the table.
//
// Thread-safety: start() and stop() on the same thread: LibTorch's profiler records the
// operations of the thread that starts it and of the threads LibTorch hands that thread's work
// to (the autograd engine, at::launch); other threads' operations are not in the trace. One
// Trace at a time per thread, and none while another LibTorch profiler is on in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/record_function.h>

namespace accelkit {

struct TraceOptions {
  std::string path;            // the Chrome trace file to write (JSON; ".json" by convention)
  bool memory = true;          // record allocations (the memory table)
  bool device = true;          // device kernels too, where the profiler records them (Kineto on CUDA)
  std::size_t top = 10;        // rows in each table
  // LibTorch's legacy autograd profiler even where Kineto is (host operations only; no
  // messages from Kineto on stderr).
  bool legacy_profiler = false;
};

struct OpTime {
  std::string name;    // "aten::mm", "autograd::engine::evaluate_function: MmBackward0", a scope's name
  std::string where;   // "cpu" (a host thread) or the device its kernels ran on ("cuda:0")
  std::int64_t calls = 0;
  double self_us = 0;  // the time in the operation itself, not in ranges nested in it
  double total_us = 0;
};

struct OpMemory {
  std::string name;
  std::string where;             // whose memory: "cpu", "cuda:0"
  std::int64_t allocations = 0;
  std::int64_t bytes = 0;        // allocated in the operation itself
  std::int64_t net_bytes = 0;    // allocated less freed in it (negative: it freed more)
};

struct TraceSummary {
  std::string path;
  std::string profiler;          // "Kineto", or the legacy profiler and why
  std::int64_t events = 0;       // ranges and allocations recorded
  double span_us = 0;            // from the first recorded range's start to the last one's end
  bool memory = false;           // allocations were recorded
  std::vector<OpTime> top_by_self_time;  // most self time first
  std::vector<OpMemory> top_by_memory;   // most bytes allocated first; operations that allocated
};

// Throws std::invalid_argument saying why `path` cannot be written as a trace file: empty, a
// directory, its directory missing or not one, no write permission. Creates nothing.
void check_trace_path(const std::string& path);

class Trace {
 public:
  Trace();
  // A trace still running is stopped and its events dropped (on the thread that started it).
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  // Starts LibTorch's profiler on this thread. Throws std::invalid_argument for a path that
  // cannot be written (check_trace_path), std::logic_error when this Trace runs already or
  // another LibTorch profiler is on in this thread.
  void start(const TraceOptions& options);
  bool running() const;
  // Stops the profiler, writes the trace file and summarises it. Throws std::logic_error when
  // not running or called on another thread than start(), std::runtime_error when the file
  // could not be written.
  TraceSummary stop();

  struct State;  // the implementation's

 private:
  std::unique_ptr<State> state_;
};

// RAII: a labelled range in the trace, around a region of the caller's code:
//
//   { accelkit::profile_scope scope("data"); batch = next_batch(); }
//
// A LibTorch user scope (at::RecordFunction with RecordScope::USER_SCOPE, what Python's
// torch.profiler.record_function makes), so any LibTorch profiler shows it, not only Trace.
// Without a profiler on it costs one look at LibTorch's callback lists: the name is not copied
// and nothing is allocated. Name it (`profile_scope scope(...)`): a temporary ends at once.
// The name is recorded with '"' as '\'', '\\' as '/' and control characters as spaces, so that
// the trace stays valid JSON (LibTorch's writers do not escape names).
class profile_scope {
 public:
  explicit profile_scope(const char* name) : range_(at::RecordScope::USER_SCOPE) {
    if (range_.isActive()) begin(std::string(name));
  }
  explicit profile_scope(const std::string& name) : range_(at::RecordScope::USER_SCOPE) {
    if (range_.isActive()) begin(name);
  }
  profile_scope(const profile_scope&) = delete;
  profile_scope& operator=(const profile_scope&) = delete;

  // Whether a profiler records this scope.
  bool recorded() const { return range_.isActive(); }

 private:
  void begin(std::string name) {
    for (char& c : name) {
      if (c == '"') c = '\'';
      else if (c == '\\') c = '/';
      else if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    }
    range_.before(std::move(name), c10::ArrayRef<const c10::IValue>{});
  }

  at::RecordFunction range_;
};

}  // namespace accelkit
