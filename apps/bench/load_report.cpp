#include "load_report.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <thread>

namespace accelkit::bench_detail {

void machine_before(BenchMachine& m, const BenchOptions& o, const std::string& label, const BenchProgressFn& progress) {
  m.logical_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.wait_quiet_s > 0) {
    const int total = static_cast<int>(std::ceil(o.wait_quiet_s));
    m.waited = wait_for_quiet(o.wait_quiet_s, 0.25, [&](double waited, double) {
      if (progress) progress(BenchProgress{label, "quiet", std::min(total, static_cast<int>(waited)), total, {}});
    });
  }
  m.other_cores_before = other_cores_now(0.3);
}

void machine_after(BenchMachine& m, const std::optional<CpuSample>& start, int threads_used) {
  m.threads_used = threads_used;
  if (const auto end = sample_cpu(); start && end) m.other_cores_during = other_cores(*start, *end);
  const double others = std::max(m.other_cores_before, m.other_cores_during);
  m.busy = cores_short(others, m.logical_cores, threads_used);
  if (!m.busy) return;
  std::ostringstream note;
  note.precision(2);
  note << "other processes kept " << others << " of the " << m.logical_cores << " cores busy (before: "
       << m.other_cores_before << ", while timing: " << m.other_cores_during << ") while the variants use up to "
       << threads_used << " threads: the figures are suspect; run again on a quiet machine (--wait-quiet waits for one)";
  m.note = note.str();
}

}  // namespace accelkit::bench_detail
