// The out-of-process plugin scan: fixture plugins that segfault, abort, hang, exit, throw out
// of noexcept or out of the C entry point, or allocate 8 GiB while being examined. The host
// (discovery, Runtime::start, the CLI's info, plugins and bench) always finishes, selects the
// CPU, and names each plugin with its reason; a verdict is reused until the file changes.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
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
    {"probe-hang", "did not finish within 2 s"},
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
  o.scan_timeout_s = 2;
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

}  // namespace

TEST_CASE("each misbehaving plugin is refused with what it did; the CPU plugin is loaded") {
  TempDir cache("accelkit-scan-cache");
  for (const auto& c : kCases) {
    CAPTURE(c.plugin);
    const auto t0 = Clock::now();
    const Discovery d = discover_plugins(options_for({cpu_plugin_dir(), fixture_dir(c.plugin)}, cache.str()));
    CHECK(seconds_since(t0) < 15);
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
  const std::string dir = private_copy(tmp, "probe-hang");
  const std::string so = dir + "/libaccelkit-probe-hang.so";
  const auto opts = options_for({cpu_plugin_dir(), dir}, cache);

  auto t0 = Clock::now();
  const Discovery first = discover_plugins(opts);
  CHECK(seconds_since(t0) >= 2);  // the child ran into the timeout
  CHECK(traced(first, so, "examined now"));
  REQUIRE(record(first, "probe-hang"));
  CHECK(record(first, "probe-hang")->status == PluginStatus::rejected);
  CHECK(fs::exists(registry_file(cache)));

  t0 = Clock::now();
  const Discovery second = discover_plugins(opts);
  CHECK(seconds_since(t0) < 2);  // no child: the recorded verdict
  CHECK(traced(second, so, "recorded"));
  CHECK_FALSE(traced(second, so, "examined now"));
  CHECK(record(second, "probe-hang")->reason == record(first, "probe-hang")->reason);

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
  CHECK(j["format"] == 1);
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
  o.settings.env = std::map<std::string, std::string>{{"ACCELKIT_PLUGIN_SCAN_TIMEOUT", "2"},
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
                            {"ACCELKIT_PLUGIN_SCAN_TIMEOUT", "2"},
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

  // Now from the registry: fast, and the same verdicts.
  t0 = Clock::now();
  const RunResult plugins = run_cli({"plugins", "--json"}, env);
  CHECK(seconds_since(t0) < 10);
  REQUIRE_MESSAGE(plugins.code == 0, describe(plugins));
  const json pj = json::parse(plugins.out);
  CHECK(contains(pj["scan"].get<std::string>(), "separate process"));
  for (const auto& p : pj["plugins"])
    if (p["name"] != "cpu") CHECK(p["status"] == "rejected");

  const RunResult text = run_cli({"plugins"}, env);
  CHECK(contains(text.out, "accelkit plugins --rescan"));

  const RunResult bench =
      run_cli({"bench", "--model", "mlp", "--width", "32", "--batch", "8", "--steps", "2", "--warmup", "1", "--json"}, env);
  REQUIRE_MESSAGE(bench.code == 0, describe(bench));
  CHECK(json::parse(bench.out)["device"] == "cpu:0");
}

}  // namespace plugin_scan_suite
