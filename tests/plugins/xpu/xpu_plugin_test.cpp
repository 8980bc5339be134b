// libaccelkit-xpu.so through the core's loader (handshake, factory, probe) and the accelkit
// CLI, on the fixture trees with the fake Level Zero loader named by ACCELKIT_LEVEL_ZERO_LOADER
// (the plugin's own dlopen path). LibTorch here has no XPU, so the GPUs are listed, monitored
// and their memory reported, never usable, and the plugin says so with the install hint.
#include <doctest/doctest.h>

#include "accelkit/loader.hpp"
#include "accelkit/sdk/monitor.hpp"
#include "cli_process.hpp"
#include "test_support.hpp"

using namespace accelkit;
using accelkit::test::contains;
using accelkit::test::describe;
using accelkit::test::ScopedEnv;

namespace {

std::string fixture(const std::string& name) { return std::string(ACCELKIT_TEST_FIXTURES) + "/xpu/" + name; }

const std::string& plugin_dir() {
  static const std::string dir = accelkit::test::private_plugin_dir({"cpu", "xpu"});
  return dir;
}

// The CLI with the xpu and CPU plugins, the fixture tree and the fake Level Zero reading `conf`.
accelkit::test::RunResult run_cli(const std::vector<std::string>& args, const std::string& tree, const std::string& conf) {
  return accelkit::test::run_cli(args, {{"ACCELKIT_PLUGIN_PATH", plugin_dir()},
                                        {"ACCELKIT_SYSFS_ROOT", tree + "/sys"},
                                        {"ACCELKIT_LEVEL_ZERO_LOADER", std::string(ACCELKIT_FAKE_ZE_PATH)},
                                        {"ACCELKIT_FAKE_ZE", conf}});
}

}  // namespace

TEST_CASE("the loader loads libaccelkit-xpu.so; on the A770 tree it lists the GPU, scores 0, says why and how") {
  ScopedEnv sysfs("ACCELKIT_SYSFS_ROOT", fixture("arc-a770") + "/sys");
  ScopedEnv loader("ACCELKIT_LEVEL_ZERO_LOADER", std::string(ACCELKIT_FAKE_ZE_PATH));
  ScopedEnv conf("ACCELKIT_FAKE_ZE", fixture("arc-a770/level_zero.conf"));
  PluginRecord rec = load_plugin_file(plugin_dir() + "/libaccelkit-xpu.so");
  CHECK(rec.name == "xpu");
  REQUIRE_MESSAGE(rec.plugin, rec.reason);
  CHECK(rec.status == PluginStatus::unavailable);
  CHECK(contains(rec.reason, "LibTorch here has no XPU"));
  REQUIRE(rec.probe);
  CHECK(rec.probe->score == 0);
  REQUIRE(rec.probe->devices.size() == 1);
  const DeviceInfo& d = rec.probe->devices[0];
  CHECK(d.id == "xpu:0");
  CHECK(d.name == "Intel(R) Arc(TM) A770 Graphics");
  CHECK(d.torch_device.empty());

  // Opened anyway, the GPU monitors and reports its memory; it refuses to plan precision.
  auto dev = rec.plugin->open(0);
  REQUIRE_MESSAGE(dev.ok(), dev.status().message());
  auto precision = dev.value()->precision();
  REQUIRE_FALSE(precision.ok());
  CHECK(contains(precision.status().message(), "LibTorch here has no XPU"));
  auto monitor = dev.value()->monitor();
  REQUIRE_MESSAGE(monitor.ok(), monitor.status().message());
  auto readings = monitor.value()->sample();
  REQUIRE(readings.ok());
  bool saw_temperature = false;
  for (const auto& r : readings.value())
    if (r.key == reading::temperature_c) saw_temperature = r.value && *r.value == doctest::Approx(48.0);
  CHECK(saw_temperature);
  auto m = dev.value()->memory();
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  CHECK(m.value().total == 17079205888ull);
  CHECK(contains(m.value().source, "no allocator figures: LibTorch here has no XPU"));
  const Status reset = dev.value()->reset_peak_memory();
  CHECK(reset.code() == StatusCode::not_supported);
  CHECK(contains(reset.message(), "xpu:0: LibTorch here has no XPU"));
  CHECK_FALSE(rec.plugin->open(1).ok());
}

TEST_CASE("CLI on the Max 1550 tree: info lists both stacks and why; --device xpu exits 3") {
  const std::string tree = fixture("max-1550");
  const std::string conf = fixture("max-1550/level_zero.conf");
  auto info = run_cli({"info"}, tree, conf);
  REQUIRE_MESSAGE(info.code == 0, describe(info));
  CHECK_MESSAGE(contains(info.out, "xpu:0  Intel(R) Data Center GPU Max 1550"), describe(info));
  CHECK(contains(info.out, "xpu:1  Intel(R) Data Center GPU Max 1550"));
  CHECK(contains(info.out, "LibTorch here has no XPU"));
  CHECK(contains(info.out, "arch=Xe-HPC"));
  CHECK(contains(info.out, "Selected: cpu:0"));

  auto pick = run_cli({"info", "--device", "xpu"}, tree, conf);
  CHECK_MESSAGE(pick.code == 3, describe(pick));
  CHECK(contains(pick.err, "LibTorch here has no XPU"));
}
