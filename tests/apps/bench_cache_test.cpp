// `accelkit bench` against a decision cache it cannot trust: its entries replaced by FIFOs or
// garbage (each said in one line, measured again and replaced, never waited on), and a cache
// directory that cannot be used (one "caching is off" line for the process, and bench runs).
// Every run has a deadline: a bench that hangs is killed and fails the test.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "cli_process.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace bench_cache_suite {

namespace {

using namespace accelkit::test;
namespace fs = std::filesystem;

const std::vector<std::string> kBench = {"bench",    "--model",  "mlp",       "--width", "32", "--batch",
                                         "8",        "--steps",  "2",         "--warmup", "1"};

// bench run with ACCELKIT_CACHE_DIR = `cache` on a machine that reads quiet (so that what it
// measures is cached); fails the test when it has not exited after `seconds` (then killed).
RunResult bench_within(const std::string& cache, int seconds) {
  FakeProcStat quiet;
  CliProcess p(kBench, {{"ACCELKIT_CACHE_DIR", cache}, {"ACCELKIT_PROCFS_ROOT", std::getenv("ACCELKIT_PROCFS_ROOT")}});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  bool exited = false;
  while (!exited && std::chrono::steady_clock::now() < deadline) {
    siginfo_t info{};
    // WNOWAIT: only whether it exited; wait() below reaps it.
    exited = ::waitid(P_PID, static_cast<id_t>(p.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == p.pid();
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!exited) ::kill(p.pid(), SIGKILL);
  RunResult r = p.wait();
  if (!exited) FAIL("bench did not exit within " << seconds << " s (killed): " << describe(r));
  return r;
}

// Lines of `text` that contain `needle`.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (contains(line, needle)) out.push_back(line);
  return out;
}

// The decision entries bench keeps (the AdamW choice, step tuning), sorted.
std::vector<fs::path> decision_entries(const fs::path& cache) {
  std::vector<fs::path> out;
  for (const char* kind : {"adamw", "steps"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache / kind, ec))
      if (e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Each entry is one line of stderr with `said`, and now a regular file holding a JSON object.
void check_said_and_replaced(const RunResult& r, const std::vector<fs::path>& entries, const std::string& said) {
  INFO(describe(r));
  CHECK(r.code == 0);
  for (const fs::path& e : entries) {
    CAPTURE(e);
    const auto lines = lines_with(r.err, e.string());
    REQUIRE(lines.size() == 1);
    CHECK(contains(lines[0], "ignoring the cache entry"));
    CHECK(contains(lines[0], said));
    REQUIRE(fs::is_regular_file(e));
    CHECK(nlohmann::json::parse(slurp(e)).is_object());
  }
}

}  // namespace

TEST_CASE("bench: decision entries that are FIFOs or garbage are said once each, measured again and replaced") {
  TempDir tmp("accelkit-bench-cache");
  const fs::path cache = tmp.path() / "cache";
  const RunResult first = bench_within(cache.string(), 300);
  REQUIRE_MESSAGE(first.code == 0, describe(first));
  const std::vector<fs::path> entries = decision_entries(cache);
  REQUIRE_FALSE(entries.empty());  // step tuning's at least; the AdamW choice's where it is measured
  MESSAGE(entries.size() << " decision entries");

  for (const fs::path& e : entries) {
    fs::remove(e);
    REQUIRE(::mkfifo(e.c_str(), 0644) == 0);
  }
  check_said_and_replaced(bench_within(cache.string(), 120), entries, "not a regular file (a FIFO)");

  for (const fs::path& e : entries) write_file(e, "\x01 not an entry {");
  check_said_and_replaced(bench_within(cache.string(), 120), entries, "");
}

TEST_CASE("bench: a cache directory that cannot be used turns caching off with one line, and bench runs") {
  TempDir tmp("accelkit-bench-cache");
  write_file(tmp.path() / "file", "x");
  const fs::path ro = tmp.make_dir("ro");
  set_mode(ro, 0555);
  struct Case {
    std::string dir, why;
  };
  std::vector<Case> cases = {{(tmp.path() / "file").string(), "Not a directory"},
                             {tmp.str() + "/" + std::string(5000, 'z'), "File name too long"}};
  if (::geteuid() != 0)
    cases.push_back({ro.string(), "Permission denied"});
  else
    MESSAGE("the read-only directory skipped: root writes into it all the same (cache_entry_test asks as another user)");
  for (const Case& c : cases) {
    CAPTURE(c.why);
    const RunResult r = bench_within(c.dir, 300);
    INFO(describe(r));
    CHECK(r.code == 0);
    CHECK(contains(r.out, "accelkit is "));  // the summary: bench ran to its end
    const auto off = lines_with(r.err, "caching is off");
    REQUIRE(off.size() == 1);
    CHECK(contains(off[0], c.why));
    CHECK(contains(off[0], c.dir.substr(0, 100)));
    CHECK(lines_with(r.err, "cach").size() == 1);  // and no cache's own warning besides
  }
}

}  // namespace bench_cache_suite
