// --trace FILE for bench and train: what is printed about a trace (core's accelkit::Trace), and
// train's tracer of a few steps, driven from the training loop's callbacks.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "accelkit/trace.hpp"
#include "json_out.hpp"

namespace accelkit::cli {

// "trace: FILE (N events, <steps>); open in ..." and the two top tables.
void render_trace(std::ostream& out, const TraceSummary& s, const std::string& steps);
// {path, profiler, steps, events, span_us, top_by_self_time[], top_by_memory[]}: the keys of
// bench --json's "trace" (apps/bench/bench_json.cpp).
Json trace_json(const TraceSummary& s, const std::string& steps);

// train --trace FILE: LibTorch's profiler over steps 2-6 of the run (its first step is warm-up:
// allocations, kernel selection), started and stopped from the training loop's callbacks, which
// run on the training thread. A run of one step traces that step. Each traced step is a
// profile_scope "train step", open from the callback before it to the one after it.
class StepTrace {
 public:
  static constexpr std::int64_t kSteps = 5;

  // Throws UsageError for a path that cannot be written: before anything runs.
  explicit StepTrace(std::string path);

  // Before the first step: `first` steps done of `steps`.
  void on_start(std::int64_t first, std::int64_t steps);
  // After each step (`step` done of `steps`).
  void after_step(std::int64_t step, std::int64_t steps);
  // After the run, on the training thread: stops a trace the run ended early (interrupted),
  // prints the tables to `err` and, with `json`, an {"event": "trace"} line on stdout; a trace
  // that could not be started or written is a line on `err`.
  void report(std::ostream& err, bool json);

 private:
  void begin(std::int64_t after);
  void end();

  TraceOptions options_;
  Trace trace_;
  std::optional<profile_scope> step_;  // the step running now
  std::int64_t first_traced_ = 0;  // steps traced: first_traced_ .. last_traced_
  std::int64_t last_traced_ = 0;
  std::optional<TraceSummary> summary_;
  std::string error_;
};

}  // namespace accelkit::cli
