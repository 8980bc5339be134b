#include "machine_load.hpp"

#include "accelkit/bench.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <thread>

#include "accelkit/sdk/host_paths.hpp"
#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::bench_detail {

std::optional<CpuSample> sample_cpu() {
  const host::ReadResult stat = host::read_file(procfs_path("stat"));
  if (!stat.ok()) return std::nullopt;
  std::istringstream in(stat.text);
  std::string cpu;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") return std::nullopt;
  in >> steal;  // older kernels stop before it
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  rusage self {};
  getrusage(RUSAGE_SELF, &self);
  CpuSample s;
  s.busy_s = static_cast<double>(user + nice + system + irq + softirq + steal) / (tick > 0 ? tick : 100);
  s.self_s = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
             static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
  s.at = std::chrono::steady_clock::now();
  return s;
}

double other_cores(const CpuSample& a, const CpuSample& b) {
  const double wall = std::chrono::duration<double>(b.at - a.at).count();
  if (wall <= 0) return 0;
  return std::max(0.0, ((b.busy_s - a.busy_s) - (b.self_s - a.self_s)) / wall);
}

double other_cores_now(double window_s) {
  const auto a = sample_cpu();
  if (!a) return -1;
  std::this_thread::sleep_for(std::chrono::duration<double>(window_s));
  const auto b = sample_cpu();
  return b ? other_cores(*a, *b) : -1;
}

std::string wait_for_quiet(double timeout_s, double quiet, const std::function<void(double, double)>& tick) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  int quiet_windows = 0;
  double last = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    last = other_cores_now(0.5);
    if (last < 0) return "the machine's load cannot be read (/proc/stat): not waited";
    quiet_windows = last < quiet ? quiet_windows + 1 : 0;
    if (tick) tick(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), last);
    if (quiet_windows >= 2) return {};
  }
  std::ostringstream why;
  why.precision(2);
  why << "the machine did not become quiet within " << timeout_s << " s (other processes used " << last << " cores)";
  return why.str();
}

void machine_before(BenchMachine& m, const BenchOptions& o, const std::string& label, const BenchProgressFn& progress) {
  m.logical_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.wait_quiet_s > 0) {
    const int total = static_cast<int>(std::ceil(o.wait_quiet_s));
    m.waited = wait_for_quiet(o.wait_quiet_s, 0.25, [&](double waited, double) {
      if (progress) progress(BenchProgress{label, "quiet", std::min(total, static_cast<int>(waited)), total});
    });
  }
  m.other_cores_before = other_cores_now(0.3);
}

void machine_after(BenchMachine& m, const std::optional<CpuSample>& start, int threads_used) {
  m.threads_used = threads_used;
  if (const auto end = sample_cpu(); start && end) m.other_cores_during = other_cores(*start, *end);
  const double others = std::max(m.other_cores_before, m.other_cores_during);
  const double free_cores = m.logical_cores - others;
  m.busy = others >= 0 && free_cores + 0.25 < threads_used;
  if (!m.busy) return;
  std::ostringstream note;
  note.precision(2);
  note << "other processes kept " << others << " of the " << m.logical_cores << " cores busy (before: "
       << m.other_cores_before << ", while timing: " << m.other_cores_during << ") while the variants use up to "
       << threads_used << " threads: the figures are suspect; run again on a quiet machine (--wait-quiet waits for one)";
  m.note = note.str();
}

}  // namespace accelkit::bench_detail
