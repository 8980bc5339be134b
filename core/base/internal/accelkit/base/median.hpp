// Medians the core's measurements share: of samples, and of a timed piece of work.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

namespace accelkit::stats {

// The median (the mean of the middle two for an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median milliseconds of `run` over `reps` timed runs (at least 1) after `warmup` untimed
// ones; `sync()` before and after each timed run (a device's synchronize; nothing on the CPU).
template <typename Run, typename Sync>
double median_run_ms(Run&& run, int warmup, int reps, Sync&& sync) {
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> ms;
  for (int i = 0; i < std::max(1, reps); ++i) {
    sync();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    sync();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(std::move(ms));
}

template <typename Run>
double median_run_ms(Run&& run, int warmup, int reps) {
  return median_run_ms(std::forward<Run>(run), warmup, reps, [] {});
}

}  // namespace accelkit::stats
