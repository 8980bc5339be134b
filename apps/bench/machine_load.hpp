// How busy the machine is with work other than this process: the CPU time every process spent
// (/proc/stat, through ACCELKIT_PROCFS_ROOT) less this process's own (getrusage), over a window,
// in cores. A benchmark taken while others use the cores its variants need misleads (one other
// process on a 2-core machine turned a 5.3x figure into 0.82x): the bench measures this before
// and while it times, says when the figure is suspect, and can wait for a quiet machine first.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "accelkit/bench.hpp"

namespace accelkit::bench_detail {

struct CpuSample {
  double busy_s = 0;  // all processes, all CPUs (user + nice + system + irq + softirq + steal)
  double self_s = 0;  // this process (user + system)
  std::chrono::steady_clock::time_point at;
};

// nullopt when /proc/stat cannot be read.
std::optional<CpuSample> sample_cpu();

// Cores other processes kept busy between `a` and `b` (never negative).
double other_cores(const CpuSample& a, const CpuSample& b);

// Cores other processes use now, over a window of `window_s` seconds; -1 when unknown.
double other_cores_now(double window_s = 0.5);

// Waits (up to `timeout_s`) until other processes use less than `quiet` cores for two windows
// in a row, calling `tick(seconds waited, other processes' cores)` after every window. Returns
// "" when the machine is quiet, else what was seen.
std::string wait_for_quiet(double timeout_s, double quiet = 0.25,
                           const std::function<void(double, double)>& tick = {});

// The machine before anything is timed: waits for quiet when `o` asks (progress phase "quiet"),
// then measures what other processes use.
void machine_before(BenchMachine& m, const BenchOptions& o, const std::string& label, const BenchProgressFn& progress);
// After timing (other processes' cores between `start` and now): busy and the note.
void machine_after(BenchMachine& m, const std::optional<CpuSample>& start, int threads_used);

}  // namespace accelkit::bench_detail
