#include "accelkit/machine_load.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <thread>

#include "accelkit/sdk/host_paths.hpp"
#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit {

namespace {

// User + system CPU seconds of a getrusage reading.
double cpu_seconds(const rusage& r) {
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

}  // namespace

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
  s.self_s = cpu_seconds(self);
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

double other_threads_cpu_s() {
  rusage all {}, self {};
  if (getrusage(RUSAGE_SELF, &all) != 0 || getrusage(RUSAGE_THREAD, &self) != 0) return -1;
  return std::max(0.0, cpu_seconds(all) - cpu_seconds(self));
}

double wait_for_idle_threads(double timeout_s, double window_s) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  double before = other_threads_cpu_s();
  if (before < 0) return -1;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(window_s));
    const double after = other_threads_cpu_s();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (after < 0) return -1;
    if (after - before < 0.1 * wall) return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    before = after;
  }
  return -1;
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

bool cores_short(double others, int logical_cores, int threads) {
  return others >= 0 && logical_cores - others + 0.25 < threads;
}

std::string contention_since(const std::optional<CpuSample>& start, int threads) {
  const auto end = sample_cpu();
  if (!start || !end) return {};
  const double others = other_cores(*start, *end);
  const int logical = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!cores_short(others, logical, threads)) return {};
  std::ostringstream note;
  note.precision(2);
  note << "other processes kept " << std::min(others, static_cast<double>(logical)) << " of the " << logical
       << " cores busy (it ran up to " << threads << " thread" << (threads == 1 ? "" : "s") << ")";
  return note.str();
}

}  // namespace accelkit
