// How busy the machine is with work other than this process: the CPU time every process spent
// (/proc/stat, through ACCELKIT_PROCFS_ROOT) less this process's own (getrusage), over a window,
// in cores. A timing taken while other processes use the cores it needs misleads (one other
// process on a 2-core machine turned a 5.3x figure into 0.82x): `accelkit bench` says so, and
// the tuners that cache what they measured (step tuning, optimize_for_inference) do not cache
// a choice made on a busy machine.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace accelkit {

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

// Whether `others` cores taken by other processes (-1: unknown) leave fewer of `logical_cores`
// free than `threads` need (a quarter of a core's slack).
bool cores_short(double others, int logical_cores, int threads);

// What other processes did to a measurement of up to `threads` threads that began at `start`:
// "" when they left it the cores it needed (or the load could not be read), else "other
// processes kept 1.7 of the 2 cores busy (it ran up to 2 threads)".
std::string contention_since(const std::optional<CpuSample>& start, int threads);

// CPU seconds this process's threads other than the calling one have used since it started
// (getrusage: the process's less the caller's); -1 where it cannot be read.
double other_threads_cpu_s();

// A change of LibTorch's thread count (at::set_num_threads) also re-creates its pthreadpool,
// whose new worker busy-waits before it sleeps (about 30 ms of a core on LibTorch 1.13, 10 ms on
// 2.x, measured on a 2-core machine): a step timed at once shares a core with it and runs at
// about one thread's speed. Waits (up to `timeout_s`) until this process's other threads have
// used under a tenth of a core for one window of `window_s`. Returns the seconds waited, or -1
// when they were still busy at the timeout (or their CPU time cannot be read).
double wait_for_idle_threads(double timeout_s = 0.5, double window_s = 0.01);

}  // namespace accelkit
