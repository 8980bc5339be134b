// What `accelkit bench` says about other work on the machine: the CPU time other processes
// spent (/proc/stat less this process), read from a fixture procfs and from the real one with
// a spinning child, the verdict and its note, and --wait-quiet giving up with what it saw.
#include "torch_doctest.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "accelkit/bench.hpp"
#include "load_report.hpp"
#include "test_support.hpp"

namespace machine_load_suite {

namespace {

using accelkit::bench_detail::CpuSample;
namespace bd = accelkit::bench_detail;

CpuSample sample(double busy, double self, double at_s) {
  CpuSample s;
  s.busy_s = busy;
  s.self_s = self;
  s.at = std::chrono::steady_clock::time_point{} + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(at_s));
  return s;
}

// A child that keeps one core busy until killed (and stops by itself after 20 s).
struct Spinner {
  pid_t pid = -1;
  Spinner() {
    pid = ::fork();
    if (pid == 0) {
      ::alarm(20);
      volatile unsigned long n = 0;
      for (;;) n = n + 1;
    }
  }
  ~Spinner() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

}  // namespace

TEST_CASE("other processes' cores: all the machine's busy time less this process's, over the wall time") {
  CHECK(bd::other_cores(sample(100, 10, 0), sample(115, 15, 10)) == doctest::Approx(1.0));  // 15 s busy, 5 ours
  CHECK(bd::other_cores(sample(100, 10, 0), sample(105, 15, 10)) == 0);   // only us: never negative
  CHECK(bd::other_cores(sample(100, 10, 5), sample(200, 10, 5)) == 0);    // no time passed
}

TEST_CASE("the machine's busy time is read from /proc/stat, through ACCELKIT_PROCFS_ROOT") {
  accelkit::test::TempDir dir;
  accelkit::test::ScopedEnv root("ACCELKIT_PROCFS_ROOT", dir.path().string());
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  {
    std::ofstream(dir.path() / "stat") << "cpu  100 20 30 5000 7 1 2 3 0 0\ncpu0 50 10 15 2500 3 0 1 1 0 0\n";
  }
  auto s = bd::sample_cpu();
  REQUIRE(s);
  CHECK(s->busy_s == doctest::Approx((100 + 20 + 30 + 1 + 2 + 3) / tick));  // idle and iowait left out
  CHECK(s->self_s > 0);  // this process has run
  {
    std::ofstream(dir.path() / "stat") << "cpu  100 20 30 5000 7 1 2\n";  // a kernel without steal
  }
  s = bd::sample_cpu();
  REQUIRE(s);
  CHECK(s->busy_s == doctest::Approx((100 + 20 + 30 + 1 + 2) / tick));
  for (const char* bad : {"", "intr 1 2 3\n", "cpu  x y z\n", "cpu0 1 2 3 4 5 6 7\n"}) {
    CAPTURE(bad);
    { std::ofstream(dir.path() / "stat") << bad; }
    CHECK(!bd::sample_cpu());
  }
  std::filesystem::remove(dir.path() / "stat");
  CHECK(!bd::sample_cpu());
  CHECK(bd::other_cores_now(0.05) == -1);  // unknown, not zero
  CHECK(bd::wait_for_quiet(1).find("cannot be read") != std::string::npos);
}

TEST_CASE("a process spinning on a core is seen; --wait-quiet gives up after its timeout and says what it saw") {
  Spinner spin;
  REQUIRE(spin.pid > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // At least a good part of a core however the scheduler shares the machine with other tests.
  CHECK(bd::other_cores_now(1.0) > 0.3);
  int ticks = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string why = bd::wait_for_quiet(1.2, 0.25, [&](double waited, double others) {
    ++ticks;
    CHECK(waited >= 0);
    CHECK(others >= 0);
  });
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(why.find("did not become quiet within 1.2 s") != std::string::npos);
  CHECK(ticks >= 2);
  CHECK(took >= 1.2);
  CHECK(took < 5);
}

TEST_CASE("the verdict: busy when other processes leave fewer free cores than the variants use") {
  const auto start = bd::sample_cpu();
  REQUIRE(start);
  accelkit::BenchMachine m;
  m.logical_cores = 2;
  m.other_cores_before = 1.0;
  bd::machine_after(m, start, 2);
  CHECK(m.threads_used == 2);
  CHECK(m.other_cores_during >= 0);
  CHECK(m.busy);
  CHECK(m.note.find("of the 2 cores busy") != std::string::npos);
  CHECK(m.note.find("--wait-quiet") != std::string::npos);

  accelkit::BenchMachine one;
  one.logical_cores = 64;  // one thread on a large machine with one core taken: fine
  one.other_cores_before = 1.0;
  bd::machine_after(one, start, 1);
  CHECK(!one.busy);
  CHECK(one.note.empty());

  accelkit::BenchMachine unknown;  // nothing could be read: no verdict either way
  unknown.logical_cores = 2;
  bd::machine_after(unknown, std::nullopt, 2);
  CHECK(!unknown.busy);
  CHECK(unknown.other_cores_during == -1);
}

TEST_CASE("waiting for this process's other threads: a spinning thread holds it to the timeout, an idle one not") {
  REQUIRE(accelkit::other_threads_cpu_s() >= 0);
  std::atomic<bool> stop{false};
  std::thread spinner([&stop] {
    volatile unsigned long n = 0;
    while (!stop.load(std::memory_order_relaxed)) n = n + 1;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double used_before = accelkit::other_threads_cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  const double busy = accelkit::wait_for_idle_threads(0.3);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(busy == -1);  // still spinning at the timeout
  CHECK(waited >= 0.3);
  CHECK(accelkit::other_threads_cpu_s() > used_before);  // the spinner's time is counted
  stop = true;
  spinner.join();
  const double idle = accelkit::wait_for_idle_threads(2.0);
  CHECK(idle >= 0);
  CHECK(idle < 1.0);
}

}  // namespace machine_load_suite
