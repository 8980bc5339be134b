// The machine's own files, at their worst, through the CLI: a FIFO where a sysfs or procfs file
// should be (/proc/cpuinfo, meminfo, a PCI vendor the core reads, a DRM card's vendor, the RAPL
// counter, the hwmon temperatures) never blocks info, monitor or report, and the refused file
// is named; values no hardware can have (10,000,000 C, -500 C, a MemTotal whose kB x 1024
// wraps) are shown as n/a (implausible) and null + reason in JSON, never as readings.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "cli_process.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace host_files_suite {

using namespace accelkit::test;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

const fs::path kFixtures = ACCELKIT_TEST_FIXTURES;

// A host tree: the AMD CPU fixture's /proc and /sys with the RDNA3 card's /sys over it.
fs::path make_tree(const TempDir& tmp) {
  const fs::path root = tmp.path() / "host";
  fs::create_directories(root);
  fs::copy(kFixtures / "cpu" / "amd", root, fs::copy_options::recursive);
  fs::copy(kFixtures / "rocm" / "rdna3" / "sys", root / "sys",
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return root;
}

void make_fifo(const fs::path& file) {
  fs::remove(file);
  REQUIRE(::mkfifo(file.c_str(), 0644) == 0);
}

EnvOverrides host_env(const fs::path& root, const TempDir& cache) {
  return {{"ACCELKIT_PLUGIN_PATH", private_plugin_dir({"cpu", "rocm"})},  // rocm reads the DRM cards
          {"ACCELKIT_SYSFS_ROOT", (root / "sys").string()},
          {"ACCELKIT_PROCFS_ROOT", (root / "proc").string()},
          {"ACCELKIT_CACHE_DIR", cache.str()}};
}

struct Outputs {
  std::string all;  // stdout and stderr of every command
  double worst_s = 0;
};

// info, monitor --count 1 and report on the tree: each must end (exit 0) within 5 s.
Outputs run_verbs(const EnvOverrides& env) {
  Outputs o;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"info"}, {"monitor", "--count", "1"}, {"report"}}) {
    CAPTURE(args.front());
    const auto t0 = Clock::now();
    const RunResult r = run_cli(args, env);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    o.worst_s = std::max(o.worst_s, s);
    CHECK_MESSAGE(r.code == 0, describe(r));
    o.all += r.out + r.err;
  }
  return o;
}

}  // namespace

TEST_CASE("a FIFO at each host file: info, monitor and report finish in 5 s and name it") {
  const std::vector<std::string> files = {"proc/cpuinfo",
                                          "proc/meminfo",
                                          "sys/bus/pci/devices/0000:0b:00.0/vendor",
                                          "sys/class/drm/card0/device/vendor",
                                          "sys/class/powercap/intel-rapl:0/energy_uj",
                                          "sys/class/hwmon/hwmon2/temp*_input"};
  for (const std::string& file : files) {
    CAPTURE(file);
    TempDir tmp("accelkit-host-fifo"), cache("accelkit-host-fifo-cache");
    const fs::path root = make_tree(tmp);
    std::string named;
    if (file.find('*') != std::string::npos) {  // every input of the temperature sensor
      for (const auto& e : fs::directory_iterator(root / "sys/class/hwmon/hwmon2"))
        if (e.path().filename().string().rfind("temp", 0) == 0 && e.path().string().find("_input") != std::string::npos) {
          make_fifo(e.path());
          named = (root / "sys/class/hwmon/hwmon2").string() + "/temp";
        }
    } else {
      make_fifo(root / file);
      named = (root / file).string();
    }
    REQUIRE_FALSE(named.empty());
    const Outputs o = run_verbs(host_env(root, cache));
    CHECK(o.worst_s < 5);
    CHECK_MESSAGE(contains(o.all, named), o.all);
    CHECK(contains(o.all, "not a regular file (a FIFO)"));
  }
}

TEST_CASE("implausible readings are n/a with the raw value, never a reading") {
  TempDir tmp("accelkit-host-implausible"), cache("accelkit-host-implausible-cache");
  const fs::path root = make_tree(tmp);
  const EnvOverrides env = host_env(root, cache);
  auto sample = [&]() {
    const RunResult r = run_cli({"monitor", "--count", "1", "--json"}, env);
    REQUIRE_MESSAGE(r.code == 0, describe(r));
    return json::parse(r.out.substr(0, r.out.find('\n')))["readings"];
  };

  SUBCASE("a temperature of 10,000,000 C and of -500 C") {
    for (const auto& [milli, raw] : {std::pair<const char*, const char*>{"10000000000", "1e+07 C"}, {"-500000", "-500 C"}}) {
      CAPTURE(raw);
      for (const auto& e : fs::directory_iterator(root / "sys/class/hwmon/hwmon2"))
        if (e.path().filename().string().find("_input") != std::string::npos) write_file(e.path(), std::string(milli) + "\n");
      const json t = sample()["temperature_c"];
      CHECK(t["value"].is_null());
      CHECK_MESSAGE(contains(t["note"].get<std::string>(), std::string("implausible: ") + raw), t.dump());
      const RunResult text = run_cli({"monitor", "--count", "1"}, env);
      CHECK(contains(text.out, std::string("n/a (implausible: ") + raw));
    }
  }
  SUBCASE("MemTotal whose kB x 1024 wraps to 1 KiB, and the largest 64-bit kB") {
    for (const char* total : {"18014398509481985", "18446744073709551615"}) {
      CAPTURE(total);
      write_file(root / "proc/meminfo",
                 std::string("MemTotal:       ") + total + " kB\nMemFree:        30000000 kB\nMemAvailable:   50000000 kB\n");
      const json m = sample()["memory_total_bytes"];
      CHECK(m["value"].is_null());
      CHECK(contains(m["note"].get<std::string>(), std::string("implausible: MemTotal ") + total));
      const RunResult info = run_cli({"info", "--json"}, env);
      REQUIRE(info.code == 0);
      const json cpu = json::parse(info.out)["selected"];
      CHECK(cpu["device"] == "cpu:0");
      const RunResult text = run_cli({"info"}, env);
      CHECK_FALSE(contains(text.out, "1.0 KiB"));
      CHECK_FALSE(contains(text.out, "PiB"));
      CHECK(contains(text.out, "memory unknown: implausible: MemTotal"));
    }
  }
}

}  // namespace host_files_suite
