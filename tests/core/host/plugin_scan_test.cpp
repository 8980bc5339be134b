// The out-of-process plugin scan: fixture plugins that segfault, abort, hang, exit, throw out
// of noexcept or out of the C entry point, or allocate 8 GiB while being examined. The host
// (discovery, Runtime::start, the CLI's info, plugins and bench) always finishes, selects the
// CPU, and names each plugin with its reason; a verdict is reused until the file changes. A
// scan that runs out of time is tried again, longer, and a timeout is no lasting verdict: the
// next run scans again, and the cpu plugin is then examined in the process. A registry that is
// a FIFO, a directory, garbage or huge costs one line, never a wait.
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "accelkit/context.hpp"
#include "accelkit/loader.hpp"
#include "accelkit/runtime.hpp"
#include "cli_process.hpp"
#include "fixture_paths.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace plugin_scan_suite {

using namespace accelkit;

using namespace accelkit::test;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// The one registry under `cache` (plugins/registry-<build>.json); "" when there is none.
fs::path registry_file(const std::string& cache) {
  fs::path found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(cache) / "plugins", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("registry-", 0) == 0 && e.path().extension() == ".json") {
      CHECK_MESSAGE(found.empty(), "two registries for one build: " << found << ", " << e.path());
      found = e.path();
    }
  }
  return found;
}

struct Misbehaviour {
  const char* plugin;
  const char* reason;  // what the refusal must say
};

// Each fixture (tests/fixtures/plugins) and the part of the refusal that names what it did.
const Misbehaviour kCases[] = {
    {"probe-segv", "killed by SIGSEGV"},
    {"factory-segv", "killed by SIGSEGV"},
    {"probe-abort", "killed by SIGABRT"},
    {"probe-hang", "did not finish within 1 s"},
    {"probe-exit", "ended the process (exit status 0) before the examination finished"},
    {"probe-throw-noexcept", "probe exploded out of noexcept"},
    {"probe-throw-int", "an exception (int) escaped a noexcept entry point"},
    {"info-throws", "accelkit_plugin_info() threw (a C entry point must not): info exploded"},
    {"probe-alloc", "std::bad_alloc"},
    {"factory-throws-raw", "factory threw (it must return null with a Status instead): factory exploded"},
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

LoaderOptions options_for(const std::vector<std::string>& dirs, const std::string& cache) {
  LoaderOptions o;
  o.cli_paths = dirs;
  o.read_environment = false;
  o.include_default_dirs = false;
  o.scan_timeout_s = 1;  // a second try follows, of 2 s to 8 s (by the machine's load)
  o.scan_memory_bytes = std::uint64_t{2} << 30;  // below probe-alloc's 8 GiB whatever the machine has
  o.cache_dir = cache;
  return o;
}

const PluginRecord* record(const Discovery& d, const std::string& name) {
  for (const auto& r : d.plugins)
    if (r.name == name) return &r;
  return nullptr;
}

bool traced(const Discovery& d, const std::string& path, const std::string& what) {
  for (const auto& line : d.trace)
    if (contains(line, path) && contains(line, what)) return true;
  return false;
}

// A private copy of one fixture plugin (a file this suite may touch), in its own directory.
std::string private_copy(const TempDir& tmp, const std::string& plugin) {
  const fs::path dir = tmp.path() / ("copy-" + plugin);
  fs::create_directories(dir);
  set_mode(dir, 0755);
  const fs::path so = dir / ("libaccelkit-" + plugin + ".so");
  fs::copy_file(fs::path(fixture_dir(plugin)) / so.filename(), so, fs::copy_options::overwrite_existing);
  set_mode(so, 0644);
  return dir.string();
}

std::string all_bad_dirs() {
  std::string path;
  for (const auto& c : kCases) path += ":" + fixture_dir(c.plugin);
  return path;
}

// A procfs whose `stat` says the machine is quiet until add_busy() says other processes ran
// (ACCELKIT_PROCFS_ROOT, the rest linked to /proc, like test::FakeProcStat); each write is a
// rename, so a reader never sees half a file, and add_busy may come from another thread.
class LoadProcStat {
 public:
  LoadProcStat() : env_("ACCELKIT_PROCFS_ROOT", dir_.str()) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      const std::string name = e.path().filename().string();
      if (name == "stat" || std::isdigit(static_cast<unsigned char>(name[0]))) continue;
      fs::create_symlink(e.path(), dir_.path() / name, ec);
    }
    write(1000);
  }
  std::string dir() const { return dir_.str(); }
  void add_busy(double seconds) { write(1000 + static_cast<long long>(seconds * static_cast<double>(::sysconf(_SC_CLK_TCK)))); }

 private:
  void write(long long ticks) const {
    std::ofstream(dir_.path() / "stat.new") << "cpu  " << ticks << " 0 0 100000 0 0 0 0 0 0\n";
    fs::rename(dir_.path() / "stat.new", dir_.path() / "stat");
  }
  TempDir dir_{"accelkit-scan-procfs"};
  ScopedEnv env_;
};

int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// "of the 2 cores busy" as the reasons say it on this machine.
std::string of_the_cores() { return " of the " + std::to_string(cores()) + (cores() == 1 ? " core busy" : " cores busy"); }

// A scanner that stops itself (SIGSTOP) at once, as a scan stopped past its timeout is: named
// by ACCELKIT_PLUGIN_SCANNER, the way an install names its own.
std::string stalled_scanner(const TempDir& tmp) {
  const fs::path script = tmp.path() / "stalled-scanner";
  write_file(script, "#!/bin/sh\nkill -STOP $$\n");
  set_mode(script, 0700);
  return script.string();
}

// The CLI run with a deadline: nullopt when it had not finished after `seconds` (then killed).
std::optional<RunResult> run_cli_within(const std::vector<std::string>& args, const EnvOverrides& env, double seconds) {
  CliProcess p(args, env);
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline) {
    siginfo_t info {};
    if (::waitid(P_PID, static_cast<id_t>(p.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == p.pid())
      return p.wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

std::size_t lines_of(const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

json registry_entry(const std::string& cache, const std::string& plugin_file) {
  std::ifstream in(registry_file(cache));
  const json j = json::parse(in);
  for (const auto& [path, e] : j["plugins"].items())
    if (fs::path(path).filename() == plugin_file) return e;
  return json();
}

}  // namespace

TEST_CASE("each misbehaving plugin is refused with what it did; the CPU plugin is loaded") {
  TempDir cache("accelkit-scan-cache");
  for (const auto& c : kCases) {
    CAPTURE(c.plugin);
    const auto t0 = Clock::now();
    const Discovery d = discover_plugins(options_for({cpu_plugin_dir(), fixture_dir(c.plugin)}, cache.str()));
    CHECK(seconds_since(t0) < 30);  // 1 s and a second try of at most 8 s, when it hangs
    const PluginRecord* cpu = record(d, "cpu");
    REQUIRE(cpu);
    CHECK(cpu->status == PluginStatus::usable);
    CHECK(contains(cpu->scan, "passed"));
    const PluginRecord* bad = record(d, c.plugin);
    REQUIRE(bad);
    CHECK(bad->status == PluginStatus::rejected);
    CHECK_MESSAGE(contains(bad->reason, c.reason), bad->reason);
    CHECK(bad->reason.size() < 600);  // one readable line, not a dump
    CHECK(contains(d.scan_note, "separate process"));
  }
}

TEST_CASE("a verdict is reused until the file changes; --rescan and a touched file examine it again") {
  TempDir tmp("accelkit-scan-reuse");
  const std::string cache = (tmp.path() / "cache").string();
  const std::string dir = private_copy(tmp, "probe-abort");
  const std::string so = dir + "/libaccelkit-probe-abort.so";
  const auto opts = options_for({cpu_plugin_dir(), dir}, cache);

  const Discovery first = discover_plugins(opts);
  CHECK(traced(first, so, "examined now"));
  REQUIRE(record(first, "probe-abort"));
  CHECK(record(first, "probe-abort")->status == PluginStatus::rejected);
  CHECK(contains(record(first, "probe-abort")->reason, "refused until the file changes"));
  CHECK(fs::exists(registry_file(cache)));

  const auto t0 = Clock::now();
  const Discovery second = discover_plugins(opts);
  CHECK(seconds_since(t0) < 2);  // no child: the recorded verdict
  CHECK(traced(second, so, "recorded"));
  CHECK_FALSE(traced(second, so, "examined now"));
  CHECK(record(second, "probe-abort")->reason == record(first, "probe-abort")->reason);

  LoaderOptions again = opts;
  again.rescan = true;
  CHECK(traced(discover_plugins(again), so, "examined now"));

  // A new version of the file (its modification time moved): examined again.
  fs::last_write_time(so, fs::last_write_time(so) + std::chrono::seconds(5));
  CHECK(traced(discover_plugins(opts), so, "examined now"));
  CHECK(traced(discover_plugins(opts), so, "recorded"));
}

TEST_CASE("a corrupt registry is rebuilt, never trusted") {
  TempDir tmp("accelkit-scan-corrupt");
  const std::string cache = (tmp.path() / "cache").string();
  const auto opts = options_for({cpu_plugin_dir(), fixture_dir("probe-abort")}, cache);
  discover_plugins(opts);
  const fs::path registry = registry_file(cache);
  REQUIRE(fs::exists(registry));
  write_file(registry, "{\"format\": 1, \"host\": \"x\", \"plugins\": {\"/nope\": {\"passed\": tr");
  const Discovery d = discover_plugins(opts);
  CHECK(traced(d, "probe-abort", "examined now"));
  CHECK(record(d, "probe-abort")->status == PluginStatus::rejected);
  std::ifstream in(registry);
  const json j = json::parse(in);  // rewritten whole
  CHECK(j["format"] == 2);
  CHECK(j["plugins"].size() == 2);
}

TEST_CASE("with the scan off, exceptions at the C entry and from a factory still only refuse the plugin") {
  TempDir cache("accelkit-scan-off");
  for (const char* plugin : {"info-throws", "factory-throws-raw"}) {
    CAPTURE(plugin);
    auto opts = options_for({cpu_plugin_dir(), fixture_dir(plugin)}, cache.str());
    opts.scan = false;
    const Discovery d = discover_plugins(opts);
    CHECK(contains(d.scan_note, "in this process"));
    CHECK(record(d, "cpu")->status == PluginStatus::usable);
    CHECK(record(d, "cpu")->scan.empty());
    const PluginRecord* bad = record(d, plugin);
    REQUIRE(bad);
    CHECK(bad->status == PluginStatus::rejected);
    CHECK(contains(bad->reason, "threw"));
  }
}

TEST_CASE("Runtime::start with every misbehaving plugin on the path selects the CPU") {
  TempDir cache("accelkit-scan-runtime");
  ContextOptions o;
  o.settings.env = std::map<std::string, std::string>{{"ACCELKIT_PLUGIN_SCAN_TIMEOUT", "1"},
                                                      {"ACCELKIT_PLUGIN_SCAN_MEMORY", "2048"}};
  o.loader = options_for({cpu_plugin_dir()}, cache.str());
  for (const auto& c : kCases) o.loader.cli_paths.push_back(fixture_dir(c.plugin));
  const auto t0 = Clock::now();
  auto rt = Runtime::start(o);
  CHECK(seconds_since(t0) < 60);
  CHECK(rt->device_handle()->info().id == "cpu:0");
  for (const auto& c : kCases) {
    const PluginRecord* r = record(rt->context().discovery(), c.plugin);
    REQUIRE(r);
    CHECK(r->status == PluginStatus::rejected);
  }
}

TEST_CASE("the CLI: info, plugins --json and bench finish, select cpu and name every refused plugin") {
  TempDir cache("accelkit-scan-cli");
  const EnvOverrides env = {{"ACCELKIT_PLUGIN_PATH", cpu_plugin_dir() + all_bad_dirs()},
                            {"ACCELKIT_PLUGIN_SCAN_TIMEOUT", "1"},
                            {"ACCELKIT_PLUGIN_SCAN_MEMORY", "2048"},
                            {"ACCELKIT_CACHE_DIR", cache.str()}};
  auto t0 = Clock::now();
  const RunResult info = run_cli({"info", "--json"}, env);
  CHECK(seconds_since(t0) < 60);
  REQUIRE_MESSAGE(info.code == 0, describe(info));
  const json j = json::parse(info.out);
  CHECK(j["selected"]["plugin"] == "cpu");
  for (const auto& c : kCases) {
    CAPTURE(c.plugin);
    bool found = false;
    for (const auto& p : j["plugins"])
      if (p["name"] == c.plugin) {
        found = true;
        CHECK(p["status"] == "rejected");
        CHECK(contains(p["reason"].get<std::string>(), c.reason));
      }
    CHECK(found);
  }

  // The next run: the verdicts from the registry, but for the timeout, which is scanned again.
  const RunResult plugins = run_cli({"plugins", "-v", "--json"}, env);
  REQUIRE_MESSAGE(plugins.code == 0, describe(plugins));
  const json pj = json::parse(plugins.out);
  CHECK(contains(pj["scan"].get<std::string>(), "separate process"));
  for (const auto& p : pj["plugins"])
    if (p["name"] != "cpu") CHECK(p["status"] == "rejected");
  std::vector<std::string> trace = pj["trace"].get<std::vector<std::string>>();
  for (const auto& c : kCases) {
    const std::string so = std::string("libaccelkit-") + c.plugin + ".so: out-of-process scan ";
    CAPTURE(so);
    const std::string expected = std::string(c.plugin) == "probe-hang" ? "failed (examined now" : "(recorded ";
    bool found = false;
    for (const auto& line : trace)
      if (contains(line, so)) {
        found = true;
        CHECK_MESSAGE(contains(line, expected), line);
      }
    CHECK(found);
  }

  const RunResult text = run_cli({"plugins"}, env);
  CHECK(contains(text.out, "accelkit plugins --rescan"));

  const RunResult bench =
      run_cli({"bench", "--model", "mlp", "--width", "32", "--batch", "8", "--steps", "2", "--warmup", "1", "--json"}, env);
  REQUIRE_MESSAGE(bench.code == 0, describe(bench));
  CHECK(json::parse(bench.out)["device"] == "cpu:0");
}

TEST_CASE("a scan that runs out of time once is tried again at once, longer, and passes") {
  TempDir tmp("accelkit-scan-slow-once");
  const std::string cache = (tmp.path() / "cache").string();
  const std::string marker = (tmp.path() / "slow-probe-ran").string();
  ScopedEnv slow("ACCELKIT_FIXTURE_SLOW_MARKER", marker);  // the first probe sleeps a minute
  auto opts = options_for({cpu_plugin_dir(), fixture_dir("probe-slow-once")}, cache);
  // Time for the first try to reach the probe (the scanner loads LibTorch first, over a second
  // on a busy machine): it must be the probe's sleep that the first timeout cuts short.
  opts.scan_timeout_s = 3;

  const auto t0 = Clock::now();
  const Discovery d = discover_plugins(opts);
  CHECK(seconds_since(t0) < 30);
  CHECK(fs::exists(marker));  // the slow probe ran, and was killed
  const PluginRecord* r = record(d, "probe-slow-once");
  REQUIRE(r);
  CHECK_MESSAGE(r->status == PluginStatus::usable, r->reason);
  CHECK_MESSAGE(contains(r->scan, "passed (examined now in "), r->scan);
  CHECK_MESSAGE(contains(r->scan, "; on a second try of "), r->scan);
  CHECK_MESSAGE(contains(r->scan, "the first try ran out of its 3 s (plugin_scan_timeout) while other processes kept "), r->scan);
  CHECK_MESSAGE(contains(r->scan, of_the_cores()), r->scan);
  const json e = registry_entry(cache, "libaccelkit-probe-slow-once.so");
  CHECK(e["passed"] == true);
  CHECK(e["timeout"] == false);

  const Discovery again = discover_plugins(opts);  // a pass is kept
  CHECK(traced(again, "probe-slow-once", "recorded"));
  CHECK(record(again, "probe-slow-once")->status == PluginStatus::usable);
}

TEST_CASE("a plugin that always runs out of time: a second try scaled by the machine's load, then refused for this run only") {
  TempDir tmp("accelkit-scan-timeout");
  const std::string cache = (tmp.path() / "cache").string();
  LoadProcStat load;  // quiet: the second try is twice the first
  auto opts = options_for({fixture_dir("probe-hang")}, cache);

  const Discovery quiet = discover_plugins(opts);
  const PluginRecord* r = record(quiet, "probe-hang");
  REQUIRE(r);
  CHECK(r->status == PluginStatus::rejected);
  CHECK_MESSAGE(contains(r->reason, "did not finish within 1 s (plugin_scan_timeout) while other processes kept 0.0" +
                                        of_the_cores() + ", nor within 2 s on a second try, and was killed"),
                r->reason);
  CHECK_MESSAGE(contains(r->reason, "(a timeout: it will be scanned again on the next run)"), r->reason);
  CHECK_FALSE(contains(r->reason, "refused until the file changes"));
  const json e = registry_entry(cache, "libaccelkit-probe-hang.so");
  CHECK(e["passed"] == false);
  CHECK(e["timeout"] == true);  // kept as a timeout: the next run scans it again (the CLI case)

  // Once per run: another discovery in this process takes the verdict it reached.
  auto t0 = Clock::now();
  const Discovery same_run = discover_plugins(opts);
  CHECK(seconds_since(t0) < 1);
  CHECK(traced(same_run, "probe-hang", "recorded"));
  CHECK(record(same_run, "probe-hang")->reason == r->reason);

  // Other processes busy during the first try (every core): the second is 8 times as long.
  opts.rescan = true;
  std::atomic<bool> done{false};
  std::thread busy([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // within the first try's second
    load.add_busy(1000);
    done = true;
  });
  t0 = Clock::now();
  const Discovery busy_run = discover_plugins(opts);
  busy.join();
  CHECK(done);
  CHECK(seconds_since(t0) >= 9);
  const std::string reason = record(busy_run, "probe-hang")->reason;
  CHECK_MESSAGE(contains(reason, "while other processes kept " + std::to_string(cores()) + ".0" + of_the_cores() +
                                     ", nor within 8 s on a second try"),
                reason);

  // The load cannot be read (no /proc/stat): 4 times, and the reason says why.
  const TempDir no_proc("accelkit-scan-noproc");
  const ScopedEnv unreadable("ACCELKIT_PROCFS_ROOT", no_proc.str());
  const std::string unknown = record(discover_plugins(opts), "probe-hang")->reason;
  CHECK_MESSAGE(contains(unknown, "did not finish within 1 s (plugin_scan_timeout) (the machine's load could not be "
                                  "read), nor within 4 s on a second try"),
                unknown);
}

TEST_CASE("the CLI: a stalled scan leaves the cpu plugin usable, says so, and the next run scans again") {
  TempDir tmp("accelkit-scan-stalled-cli");
  const LoadProcStat quiet;  // the second try: 2 s (what runs out of time here is a stopped scanner)
  const EnvOverrides env = {{"ACCELKIT_PLUGIN_SCANNER", stalled_scanner(tmp)},
                            {"ACCELKIT_PROCFS_ROOT", quiet.dir()},
                            {"ACCELKIT_PLUGIN_SCAN_TIMEOUT", "1"},
                            {"ACCELKIT_PLUGIN_PATH", cpu_plugin_dir() + ":" + fixture_dir("cuda")},
                            {"ACCELKIT_CACHE_DIR", (tmp.path() / "cache").string()}};
  const RunResult info = run_cli({"info"}, env);
  REQUIRE_MESSAGE(info.code == 0, describe(info));
  CHECK(contains(info.out, "Selected: cpu:0"));
  CHECK(contains(info.out, "scan: failed (examined now in "));
  CHECK(contains(info.out, "nor within 2 s on a second try"));
  CHECK(contains(info.out, "examined in this process instead, as the cpu plugin is the fallback"));
  CHECK(contains(info.out, "(a timeout: it will be scanned again on the next run)"));  // cuda's
  CHECK_MESSAGE(lines_of(info.err) == 1, info.err);  // the cpu plugin's warning
  CHECK(contains(info.err, "examined in this process instead"));

  const RunResult next = run_cli({"plugins", "-v", "--json"}, env);
  REQUIRE_MESSAGE(next.code == 0, describe(next));
  const std::vector<std::string> trace = json::parse(next.out)["trace"].get<std::vector<std::string>>();
  CHECK(any_contains(trace, "libaccelkit-cpu.so: out-of-process scan failed (examined now in "));
  CHECK(any_contains(trace, "libaccelkit-cuda.so: out-of-process scan failed (examined now in "));
}

TEST_CASE("a registry that is a FIFO, a directory, garbage or huge is one line and ignored, never a wait") {
  TempDir tmp("accelkit-scan-registry");
  const std::string cache = (tmp.path() / "cache").string();
  const EnvOverrides env = {{"ACCELKIT_CACHE_DIR", cache}};
  REQUIRE(run_cli({"info"}, env).code == 0);
  const fs::path registry = registry_file(cache);
  REQUIRE(fs::is_regular_file(registry));
  struct Case {
    const char* what;
    void (*make)(const fs::path&);
    const char* says;
  };
  const Case cases[] = {
      {"FIFO", [](const fs::path& p) { REQUIRE(::mkfifo(p.c_str(), 0600) == 0); }, "not a regular file (a FIFO)"},
      {"directory", [](const fs::path& p) { fs::create_directory(p); },
       "not a regular file (a directory), so no verdict is kept"},
      {"garbage", [](const fs::path& p) { write_file(p, std::string("\x7f\x01garbage\n{[\xff", 13)); }, "unreadable ("},
      {"huge", [](const fs::path& p) { write_file(p, std::string((std::size_t{5} << 20), ' ')); }, "larger than 4 MiB"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    fs::remove_all(registry);
    c.make(registry);
    const std::optional<RunResult> r = run_cli_within({"info"}, env, 60);
    REQUIRE_MESSAGE(r, "accelkit info did not finish within 60 s");
    CHECK_MESSAGE(r->code == 0, describe(*r));
    CHECK(contains(r->out, "Selected: cpu:0"));
    CHECK_MESSAGE(lines_of(r->err) == 1, r->err);
    CHECK_MESSAGE(contains(r->err, "plugin registry " + registry.string() + " not used: " + c.says), r->err);
    CHECK_MESSAGE(contains(r->err, "examining every plugin again"), r->err);
    // Rewritten as a registry, but where a directory stands.
    CHECK(fs::is_directory(registry) == (std::string(c.what) == "directory"));
  }
}

}  // namespace plugin_scan_suite
