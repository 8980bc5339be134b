// Timing helpers shared by the standalone bench programs in this directory.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace accelkit::bench_timing {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The median of `v` (0 for none).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The program benches' table: each variant's median epoch and batch, its warm-up epoch, its
// speedup over the first variant and its test accuracy (`acc`, percent). Variants have `name`,
// `epochs_ms` and `first_ms`.
template <class Variant>
void print_epoch_table(const std::vector<Variant>& vs, const std::vector<double>& acc, int epochs, int batches) {
  std::printf("medians of %d epochs each after one warm-up epoch, variants alternating:\n", epochs);
  std::printf("  %-11s %12s %12s %12s %10s %10s\n", "variant", "epoch ms", "batch ms", "first epoch", "speedup",
              "test acc");
  const double base = median(vs[0].epochs_ms);
  for (std::size_t i = 0; i < vs.size(); ++i) {
    const double m = median(vs[i].epochs_ms);
    std::printf("  %-11s %12.1f %12.3f %12.1f %9.2fx %9.2f%%\n", vs[i].name.c_str(), m, m / batches, vs[i].first_ms,
                base / m, acc[i]);
  }
}

}  // namespace accelkit::bench_timing
