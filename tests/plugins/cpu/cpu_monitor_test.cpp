// CpuMonitor against fixture trees: temperature source choice, RAPL power from two samples
// (known energy delta over a known elapsed time), counter wrap, permission denied,
// utilisation from two /proc/stat snapshots, memory, and a machine without sensors.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "cpu_monitor.hpp"

using namespace accelkit;
using namespace accelkit::cpu;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

void set_roots(const fs::path& base) {
  ::setenv("ACCELKIT_SYSFS_ROOT", (base / "sys").c_str(), 1);
  ::setenv("ACCELKIT_PROCFS_ROOT", (base / "proc").c_str(), 1);
}

fs::path fixture(const std::string& name) {
  return fs::path(ACCELKIT_TEST_FIXTURES) / "cpu" / name;
}

// Uses a fixture in place (read-only) for the scope.
struct FixtureRoots {
  explicit FixtureRoots(const std::string& name) { set_roots(fixture(name)); }
  ~FixtureRoots() {
    ::unsetenv("ACCELKIT_SYSFS_ROOT");
    ::unsetenv("ACCELKIT_PROCFS_ROOT");
  }
};

// A writable copy of a fixture in a fresh temporary directory, removed at the end.
struct FixtureCopy {
  explicit FixtureCopy(const std::string& name) {
    std::string tmpl = (fs::temp_directory_path() / "accelkit-cpu-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root = tmpl;
    fs::copy(fixture(name), root, fs::copy_options::recursive);
    set_roots(root);
  }
  ~FixtureCopy() {
    ::unsetenv("ACCELKIT_SYSFS_ROOT");
    ::unsetenv("ACCELKIT_PROCFS_ROOT");
    std::error_code ec;
    fs::permissions(root, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(root, ec);
  }
  void write(const std::string& rel, const std::string& text) const {
    std::ofstream out(root / rel, std::ios::trunc);
    REQUIRE(out);
    out << text;
  }
  fs::path root;
};

const Reading& find(const std::vector<Reading>& v, const std::string& key) {
  for (const Reading& r : v)
    if (r.key == key) return r;
  FAIL("no reading " << key);
  static Reading none;
  return none;
}

bool has(const std::vector<Reading>& v, const std::string& key) {
  for (const Reading& r : v)
    if (r.key == key) return true;
  return false;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const auto t0 = std::chrono::steady_clock::time_point(100s);

}  // namespace

TEST_CASE("temperature: coretemp Package id 0 over cores, ACPI and x86_pkg_temp") {
  FixtureRoots roots("intel");
  CpuMonitor m;
  auto s = m.sample_at(t0);
  REQUIRE(s.ok());
  const Reading& t = find(s.value(), reading::temperature_c);
  REQUIRE(t.value);
  CHECK(*t.value == doctest::Approx(52.0));
  CHECK(t.unit == "C");
  CHECK(t.source == "hwmon coretemp Package id 0");
}

TEST_CASE("temperature: k10temp Tccd (max) over Tctl, NVMe ignored") {
  FixtureRoots roots("amd");
  auto s = CpuMonitor().sample_at(t0);
  REQUIRE(s.ok());
  const Reading& t = find(s.value(), reading::temperature_c);
  REQUIRE(t.value);
  CHECK(*t.value == doctest::Approx(61.5));
  CHECK(t.source == "hwmon k10temp Tccd1,Tccd2");
}

TEST_CASE("temperature: k10temp with Tctl only") {
  FixtureRoots roots("rapl_denied");
  auto s = CpuMonitor().sample_at(t0);
  REQUIRE(s.ok());
  const Reading& t = find(s.value(), reading::temperature_c);
  REQUIRE(t.value);
  CHECK(*t.value == doctest::Approx(45.125));
  CHECK(t.source == "hwmon k10temp Tctl");
}

TEST_CASE("temperature: zenpower is read like k10temp") {
  FixtureCopy tree("rapl_denied");
  tree.write("sys/class/hwmon/hwmon1/name", "zenpower\n");
  tree.write("sys/class/hwmon/hwmon1/temp2_label", "Tdie\n");
  tree.write("sys/class/hwmon/hwmon1/temp2_input", "44000\n");
  auto s = CpuMonitor().sample_at(t0);
  REQUIRE(s.ok());
  const Reading& t = find(s.value(), reading::temperature_c);
  REQUIRE(t.value);
  CHECK(*t.value == doctest::Approx(44.0));  // Tdie preferred over Tctl
  CHECK(t.source == "hwmon zenpower Tdie");
}

TEST_CASE("temperature: x86_pkg_temp thermal zone when no hwmon CPU sensor") {
  FixtureCopy tree("intel");
  fs::remove_all(tree.root / "sys/class/hwmon/hwmon1");
  auto s = CpuMonitor().sample_at(t0);
  REQUIRE(s.ok());
  const Reading& t = find(s.value(), reading::temperature_c);
  REQUIRE(t.value);
  CHECK(*t.value == doctest::Approx(53.0));
  CHECK(t.source == "thermal_zone x86_pkg_temp");
}

TEST_CASE("power: RAPL energy delta over elapsed time") {
  FixtureCopy tree("intel");
  CpuMonitor m;
  auto first = m.sample_at(t0);
  REQUIRE(first.ok());
  const Reading& p0 = find(first.value(), reading::power_w);
  CHECK_FALSE(p0.value);
  CHECK(contains(p0.note, "first sample"));
  CHECK(p0.source == "RAPL package-0");
  const Reading& limit = find(first.value(), reading::power_limit_w);
  REQUIRE(limit.value);
  CHECK(*limit.value == doctest::Approx(91.0));

  tree.write("sys/class/powercap/intel-rapl:0/energy_uj", "153456789\n");  // +30 J
  auto second = m.sample_at(t0 + 2s);
  REQUIRE(second.ok());
  const Reading& p1 = find(second.value(), reading::power_w);
  REQUIRE(p1.value);
  CHECK(*p1.value == doctest::Approx(15.0));
  CHECK(p1.unit == "W");

  tree.write("sys/class/powercap/intel-rapl:0/energy_uj", "153956789\n");  // +0.5 J
  auto third = m.sample_at(t0 + 2500ms);
  REQUIRE(third.ok());
  REQUIRE(find(third.value(), reading::power_w).value);
  CHECK(*find(third.value(), reading::power_w).value == doctest::Approx(1.0));

  // No time elapsed: n/a, not a division by zero.
  auto same = m.sample_at(t0 + 2500ms);
  REQUIRE(same.ok());
  CHECK_FALSE(find(same.value(), reading::power_w).value);
}

TEST_CASE("power: counter wrap uses max_energy_range_uj") {
  FixtureCopy tree("amd");  // max_energy_range_uj = 4294967295
  tree.write("sys/class/powercap/intel-rapl:0/energy_uj", "4294867295\n");
  CpuMonitor m;
  REQUIRE(m.sample_at(t0).ok());
  tree.write("sys/class/powercap/intel-rapl:0/energy_uj", "900000\n");
  auto s = m.sample_at(t0 + 1s);
  REQUIRE(s.ok());
  const Reading& p = find(s.value(), reading::power_w);
  REQUIRE(p.value);
  CHECK(*p.value == doctest::Approx(1.0));  // 100000 to the top + 900000 after the wrap
}

TEST_CASE("power: counter went back with the range unknown is n/a") {
  FixtureCopy tree("amd");
  fs::remove(tree.root / "sys/class/powercap/intel-rapl:0/max_energy_range_uj");
  CpuMonitor m;
  REQUIRE(m.sample_at(t0).ok());
  tree.write("sys/class/powercap/intel-rapl:0/energy_uj", "10\n");
  auto s = m.sample_at(t0 + 1s);
  REQUIRE(s.ok());
  const Reading& p = find(s.value(), reading::power_w);
  CHECK_FALSE(p.value);
  CHECK(contains(p.note, "max_energy_range_uj"));
}

TEST_CASE("power: permission denied on energy_uj is n/a with a note, not an error") {
  // Root reads mode-000 files, so the kernel's EACCES (non-root, Linux >= 5.10) is injected
  // through the monitor's file reader; everything else is read from the fixture.
  FixtureRoots roots("rapl_denied");
  CpuMonitor m([](const std::string& path) {
    if (path.size() >= 10 && path.compare(path.size() - 10, 10, "/energy_uj") == 0)
      return host::ReadResult{{}, EACCES};
    return host::read_file(path);
  });
  for (auto t : {t0, t0 + 1s}) {
    auto s = m.sample_at(t);
    REQUIRE(s.ok());
    const Reading& p = find(s.value(), reading::power_w);
    CHECK_FALSE(p.value);
    CHECK(contains(p.note, "permission denied"));
    CHECK(contains(p.note, "root"));
    CHECK(find(s.value(), reading::temperature_c).value);  // the rest still reads
  }
}

TEST_CASE("power: a real mode-000 energy_uj when not running as root") {
  if (::geteuid() == 0) {
    MESSAGE("skipped: running as root, which can read mode-000 files (see the injected test)");
    return;
  }
  FixtureCopy tree("rapl_denied");
  fs::permissions(tree.root / "sys/class/powercap/intel-rapl:0/energy_uj", fs::perms::none);
  CpuMonitor m;
  auto s = m.sample_at(t0);
  REQUIRE(s.ok());
  CHECK(contains(find(s.value(), reading::power_w).note, "permission denied"));
}

TEST_CASE("utilisation: tick delta between two /proc/stat snapshots") {
  FixtureCopy tree("intel");  // cpu  40000 0 10000 150000 100 0 10 0 0 0
  CpuMonitor m;
  auto first = m.sample_at(t0);
  REQUIRE(first.ok());
  const Reading& u0 = find(first.value(), reading::utilisation_pct);
  CHECK_FALSE(u0.value);
  CHECK(contains(u0.note, "first sample"));

  // +250 user, +50 system, +100 idle: 300 of 400 ticks busy.
  tree.write("proc/stat", "cpu  40250 0 10050 150100 100 0 10 0 0 0\ncpu0 1 2 3 4 5 6 7 0 0 0\n");
  auto second = m.sample_at(t0 + 1s);
  REQUIRE(second.ok());
  const Reading& u1 = find(second.value(), reading::utilisation_pct);
  REQUIRE(u1.value);
  CHECK(*u1.value == doctest::Approx(75.0));
  CHECK(u1.unit == "%");
}

TEST_CASE("memory: used = MemTotal - MemAvailable") {
  FixtureRoots roots("intel");
  auto s = CpuMonitor().sample_at(t0);
  REQUIRE(s.ok());
  const Reading& total = find(s.value(), reading::memory_total_bytes);
  const Reading& used = find(s.value(), reading::memory_used_bytes);
  REQUIRE(total.value);
  REQUIRE(used.value);
  CHECK(*total.value == doctest::Approx(32734504.0 * 1024));
  CHECK(*used.value == doctest::Approx((32734504.0 - 28000000.0) * 1024));
}

TEST_CASE("no sensors: every missing sensor is n/a with a note, never an error") {
  FixtureRoots roots("nosensors");
  CpuMonitor m;
  CHECK_FALSE(m.temperature_source());
  for (auto t : {t0, t0 + 1s}) {
    auto s = m.sample_at(t);
    REQUIRE(s.ok());
    const Reading& temp = find(s.value(), reading::temperature_c);
    CHECK_FALSE(temp.value);
    CHECK(contains(temp.note, "n/a: no hwmon temperature sensor"));
    const Reading& power = find(s.value(), reading::power_w);
    CHECK_FALSE(power.value);
    CHECK(contains(power.note, "no RAPL"));
    CHECK_FALSE(has(s.value(), reading::power_limit_w));
    CHECK(find(s.value(), reading::memory_total_bytes).value);
  }
}

TEST_CASE("missing /proc files: n/a with the reason") {
  FixtureCopy tree("nosensors");
  fs::remove(tree.root / "proc/stat");
  fs::remove(tree.root / "proc/meminfo");
  auto s = CpuMonitor().sample_at(t0);
  REQUIRE(s.ok());
  CHECK(contains(find(s.value(), reading::utilisation_pct).note, "cannot read"));
  CHECK(contains(find(s.value(), reading::memory_used_bytes).note, "cannot read"));
  CHECK_FALSE(find(s.value(), reading::memory_total_bytes).value);
}

TEST_CASE("this machine: sample() works, every reading has a value or a note") {
  ::unsetenv("ACCELKIT_SYSFS_ROOT");
  ::unsetenv("ACCELKIT_PROCFS_ROOT");
  CpuMonitor m;
  REQUIRE(m.sample().ok());
  auto s = m.sample();
  REQUIRE(s.ok());
  CHECK(s.value().size() >= 5);
  for (const Reading& r : s.value()) {
    INFO(r.key);
    CHECK((r.value.has_value() || !r.note.empty()));
  }
  CHECK(find(s.value(), reading::memory_total_bytes).value);
}

TEST_CASE("temperature limit: the lowest temp*_max, else temp*_crit, beside the chosen sensors") {
  FixtureCopy f("intel");
  {
    auto s = CpuMonitor().sample_at(t0);
    REQUIRE(s.ok());
    const Reading& limit = find(s.value(), reading::temperature_limit_c);
    REQUIRE(limit.value);
    CHECK(*limit.value == doctest::Approx(100.0));  // Package id 0's temp1_crit
    CHECK(limit.source == "hwmon coretemp temp1_crit");
  }
  f.write("sys/class/hwmon/hwmon1/temp1_max", "84000\n");  // where it starts to throttle: preferred
  auto s = CpuMonitor().sample_at(t0);
  REQUIRE(s.ok());
  const Reading& limit = find(s.value(), reading::temperature_limit_c);
  CHECK(*limit.value == doctest::Approx(84.0));
  CHECK(limit.source == "hwmon coretemp temp1_max");
  FixtureRoots amd("amd");  // k10temp publishes neither: no reading
  CHECK_FALSE(has(CpuMonitor().sample_at(t0).value(), reading::temperature_limit_c));
}

TEST_CASE("throttled: the thermal_throttle counters moving between samples") {
  FixtureCopy f("intel");
  for (const char* cpu : {"cpu0", "cpu1"}) {
    fs::create_directories(f.root / "sys/devices/system/cpu" / cpu / "thermal_throttle");
    f.write(std::string("sys/devices/system/cpu/") + cpu + "/thermal_throttle/core_throttle_count", "3\n");
    f.write(std::string("sys/devices/system/cpu/") + cpu + "/thermal_throttle/package_throttle_count", "10\n");
  }
  CpuMonitor m;
  auto first = m.sample_at(t0);
  REQUIRE(first.ok());
  const Reading& r0 = find(first.value(), reading::throttled);
  CHECK_FALSE(r0.value);
  CHECK(contains(r0.note, "first sample"));
  auto calm = m.sample_at(t0 + 1s);
  CHECK(find(calm.value(), reading::throttled).value == 0.0);
  f.write("sys/devices/system/cpu/cpu1/thermal_throttle/package_throttle_count", "14\n");
  auto hot = m.sample_at(t0 + 2s);
  const Reading& r2 = find(hot.value(), reading::throttled);
  CHECK(r2.value == 1.0);
  CHECK(contains(r2.note, "4 events"));
  CHECK(r2.unit == "bool");
  f.write("sys/devices/system/cpu/cpu1/thermal_throttle/package_throttle_count", "0\n");  // reset
  CHECK_FALSE(find(m.sample_at(t0 + 3s).value(), reading::throttled).value);
  FixtureRoots amd("amd");  // no counters (not x86's therm_throt): no reading
  CHECK_FALSE(has(CpuMonitor().sample_at(t0).value(), reading::throttled));
}
