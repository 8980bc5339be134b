// The xpu plugin's probe, report, precision plan, monitor and memory figures against fixture
// sysfs trees (ACCELKIT_SYSFS_ROOT) and a fake Level Zero loader (fake_level_zero.cpp, through
// the same dlopen path as libze_loader.so.1): an Arc A770 on i915, a Data Center GPU Max 1550
// on xe (two stacks, one Level Zero device each), a Core Ultra iGPU (Meteor Lake), a machine
// with no Intel GPU, and malformed files and answers.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <filesystem>
#include <map>

#include "precision_plan.hpp"
#include "xpu_memory.hpp"
#include "xpu_monitor.hpp"
#include "xpu_probe.hpp"
#include "xpu_report.hpp"
#include "test_support.hpp"

using namespace accelkit;
using namespace accelkit::xpu;
using accelkit::test::contains;
using accelkit::test::ScopedEnv;
using accelkit::test::TempDir;
using accelkit::test::write_file;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) { return std::string(ACCELKIT_TEST_FIXTURES) + "/xpu/" + name; }

// The fake loader forgets its configuration, so the next zeInit reads ACCELKIT_FAKE_ZE again.
void reset_fake() {
  void* h = ::dlopen(ACCELKIT_FAKE_ZE_PATH, RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(h, ::dlerror());
  void* reset = ::dlsym(h, "accelkit_fake_ze_reset");
  REQUIRE_MESSAGE(reset, "the fake Level Zero has no accelkit_fake_ze_reset");
  reinterpret_cast<void (*)()>(reset)();
}

// The probe of fixture tree `sys` (a directory holding sys/), with the fake Level Zero reading
// `conf` ("" = no Level Zero at all).
XpuProbe probe(const std::string& sys, const std::string& conf) {
  ScopedEnv sysfs("ACCELKIT_SYSFS_ROOT", sys + "/sys");
  ProbeOptions o;
  o.load_level_zero = !conf.empty();
  if (conf.empty()) return probe_xpu(o);
  ScopedEnv config("ACCELKIT_FAKE_ZE", conf);
  reset_fake();
  o.level_zero.libraries = {ACCELKIT_FAKE_ZE_PATH};
  return probe_xpu(o);
}

TorchXpu no_xpu() { return TorchXpu{false, "no XPU device guard registered", 0}; }
TorchXpu with_xpu(int n) { return TorchXpu{true, "XPU device guard registered", n}; }

std::map<std::string, Reading> sample(XpuMonitor& m) {
  auto r = m.sample();
  REQUIRE(r.ok());
  std::map<std::string, Reading> out;
  for (const auto& reading : r.value()) out[reading.key] = reading;
  return out;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines)
    if (contains(l, needle)) return true;
  return false;
}

std::string prop(const DeviceInfo& d, const std::string& key) {
  for (const auto& [k, v] : d.properties)
    if (k == key) return v;
  return "";
}

}  // namespace

TEST_CASE("architecture rules by PCI id: XMX and bf16, fp16 only, TF32 only on Xe-HPC") {
  CHECK(arch_of(0x56a0) == XeArch::xe_hpg);      // Arc A770
  CHECK(arch_of(0x56c0) == XeArch::xe_hpg);      // Flex 170
  CHECK(arch_of(0x0bd5) == XeArch::xe_hpc);      // Max 1550
  CHECK(arch_of(0xe20b) == XeArch::xe2_hpg);     // Arc B580
  CHECK(arch_of(0x64a0) == XeArch::xe2_lpg);     // Lunar Lake
  CHECK(arch_of(0x7d55) == XeArch::xe_lpg);      // Meteor Lake
  CHECK(arch_of(0x7d51) == XeArch::xe_lpg_plus); // Arrow Lake-H: inside the Xe-LPG range, with XMX
  CHECK(arch_of(0x9a49) == XeArch::xe_lp);       // Tiger Lake
  CHECK(arch_of(0x1234) == XeArch::unknown);

  const XpuRules hpc = xpu_rules(0x0bd5);
  CHECK(hpc.xmx);
  CHECK(hpc.tf32);
  CHECK(hpc.dtype == Dtype::bf16);
  const XpuRules arc = xpu_rules(0x56a0);
  CHECK(arc.bf16);
  CHECK(arc.fp16);
  CHECK_FALSE(arc.tf32);
  CHECK_FALSE(arc.integrated);
  const XpuRules mtl = xpu_rules(0x7d55);
  CHECK_FALSE(mtl.xmx);
  CHECK_FALSE(mtl.bf16);
  CHECK(mtl.fp16);
  CHECK(mtl.dtype == Dtype::fp16);
  CHECK(mtl.integrated);
  const XpuRules tgl = xpu_rules(0x9a49);
  CHECK(tgl.dtype == Dtype::fp32);
  CHECK_FALSE(tgl.pytorch_target);
  CHECK(xpu_rules(0x1234).reasons.front().find("8086:1234") != std::string::npos);
  CHECK(std::string(product_name(0x0bd5)) == "Intel Data Center GPU Max 1550");
  CHECK(std::string(product_name(0x1234)).empty());
}

TEST_CASE("precision plans: bf16 and TF32 on Xe-HPC, TF32 refused on Xe-HPG, fp16 with loss scaling on Xe-LPG") {
  PrecisionRequest automatic;
  auto hpc = plan_xpu_precision(automatic, xpu_rules(0x0bd5), "xpu:0 Max 1550");
  REQUIRE(hpc.ok());
  CHECK(hpc.value().dtype == Dtype::bf16);
  CHECK(hpc.value().autocast);
  CHECK(hpc.value().tf32);
  PrecisionRequest no_tf32;
  no_tf32.tf32 = Toggle::off;
  auto hpc_off = plan_xpu_precision(no_tf32, xpu_rules(0x0bd5), "xpu:0");
  REQUIRE(hpc_off.ok());
  CHECK_FALSE(hpc_off.value().tf32);

  PrecisionRequest tf32_on;
  tf32_on.tf32 = Toggle::on;
  auto arc = plan_xpu_precision(tf32_on, xpu_rules(0x56a0), "xpu:0 Arc A770");
  REQUIRE_FALSE(arc.ok());
  CHECK(arc.status().code() == StatusCode::not_supported);
  CHECK(contains(arc.status().message(), "Xe-HPG"));

  auto mtl = plan_xpu_precision(automatic, xpu_rules(0x7d55), "xpu:0");
  REQUIRE(mtl.ok());
  CHECK(mtl.value().dtype == Dtype::fp16);
  CHECK(mtl.value().loss_scaling);
  PrecisionRequest bf16;
  bf16.precision = Dtype::bf16;
  auto refused = plan_xpu_precision(bf16, xpu_rules(0x7d55), "xpu:0");
  REQUIRE_FALSE(refused.ok());
  CHECK(contains(refused.status().message(), "no bf16 arithmetic"));
}

TEST_CASE("Arc A770 on i915 without Level Zero: listed from sysfs, not usable, says why and how") {
  XpuProbe p = probe(fixture("arc-a770"), "");
  REQUIRE(p.gpus.size() == 1);  // the virtio card and the DP connector entry are not Intel GPUs
  const XpuGpu& g = p.gpus[0];
  REQUIRE(g.card);
  CHECK_FALSE(g.ze);
  CHECK(g.card->driver == "i915");
  CHECK(g.card->pci_address == "0000:03:00.0");
  CHECK(g.card->device_id == 0x56a0);
  CHECK(g.card->render_minor == 128);
  REQUIRE(g.card->vram_bytes);
  CHECK(*g.card->vram_bytes == 17079205888ull);
  CHECK(g.card->energy_file == "energy1_input");
  CHECK(g.card->temp_file.empty());  // i915's hwmon has no temperature
  CHECK(g.rules.arch == XeArch::xe_hpg);

  XpuReport r = make_xpu_report(p, no_xpu());
  CHECK(r.score == 0);
  REQUIRE(r.devices.size() == 1);
  const DeviceInfo& d = r.devices[0];
  CHECK(d.id == "xpu:0");
  CHECK(d.torch_device.empty());
  CHECK(d.name == "Intel Arc A770 [8086:56a0]");  // without Level Zero: the PCI id's name
  CHECK(d.kind == DeviceKind::discrete_gpu);
  CHECK(d.memory_bytes == 17079205888ull);
  CHECK(d.capabilities.has(Capability::bf16));
  CHECK(d.capabilities.has(Capability::fp16));
  CHECK_FALSE(d.capabilities.has(Capability::tf32));
  CHECK(d.capabilities.has(Capability::power));
  CHECK_FALSE(d.capabilities.has(Capability::thermal));
  CHECK(prop(d, "driver") == "i915");
  CHECK(r.reasons.front().rfind(kNoXpu, 0) == 0);
  CHECK(any_contains(r.warnings, "download.pytorch.org/whl/xpu"));
  CHECK(any_contains(r.reasons, "Level Zero"));
  CHECK(r.unusable[0] == kNoXpu);

  // Memory without LibTorch's allocator: the i915 backport's lmem figures, said to be device-wide.
  auto m = xpu_memory("xpu:0", g, std::nullopt, std::nullopt, kNoXpu);
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  CHECK(m.value().total == 17079205888ull);
  CHECK(m.value().available == 16106127360ull);
  CHECK_FALSE(m.value().in_use);
  CHECK(contains(m.value().source, "lmem_avail_bytes"));
  CHECK(contains(m.value().source, kNoXpu));
  auto with_allocator = xpu_memory("xpu:0", g, std::nullopt, AllocatorFigures{1000, 2000, 4096}, "");
  REQUIRE(with_allocator.ok());
  CHECK(with_allocator.value().in_use == 1000u);
  CHECK(with_allocator.value().peak == 2000u);
  CHECK(with_allocator.value().reserved == 4096u);
}

TEST_CASE("Arc A770 with Level Zero: named, matched by PCI address, usable where LibTorch has XPU") {
  XpuProbe p = probe(fixture("arc-a770"), fixture("arc-a770/level_zero.conf"));
  REQUIRE_MESSAGE(p.level_zero.initialised, p.level_zero.error);
  REQUIRE(p.gpus.size() == 1);
  const XpuGpu& g = p.gpus[0];
  REQUIRE(g.ze);
  REQUIRE(g.card);  // the same GPU, by PCI address: one device, not two
  CHECK(g.ze_index == 0);
  CHECK(g.ze->name == "Intel(R) Arc(TM) A770 Graphics");
  CHECK(g.ze->execution_units == 512);
  CHECK(g.ze->pci_address == "0000:03:00.0");
  REQUIRE(g.sysman);
  CHECK(g.sysman->temperature_c == doctest::Approx(48.0));

  XpuReport none = make_xpu_report(p, no_xpu());
  CHECK(none.score == 0);
  XpuReport r = make_xpu_report(p, with_xpu(1));
  // Above the device-generic torch plugin's score (5) for the same XPU device.
  CHECK(r.score == 100);
  const DeviceInfo& d = r.devices[0];
  CHECK(d.torch_device == "xpu:0");
  CHECK(d.name == "Intel(R) Arc(TM) A770 Graphics");
  CHECK(d.cores == 512u);
  CHECK(d.capabilities.has(Capability::thermal));  // from Sysman: i915's hwmon has none
  CHECK(any_contains(r.reasons, "1 of 1 Intel GPU usable"));

  // LibTorch seeing fewer devices than Level Zero lists: not usable, and why.
  XpuReport zero = make_xpu_report(p, with_xpu(0));
  CHECK(zero.score == 0);
  CHECK(contains(zero.unusable[0], "ZE_AFFINITY_MASK"));

  // The monitor: hwmon wins where it has the figure (power limit), Sysman fills what i915 lacks.
  XpuMonitor mon(g, p.level_zero.sysman);
  auto s = sample(mon);
  CHECK(s.at(reading::temperature_c).value == doctest::Approx(48.0));
  CHECK(contains(s.at(reading::temperature_c).source, "Sysman"));
  CHECK(s.at(reading::power_limit_w).value == doctest::Approx(190.0));
  CHECK(s.at(reading::clock_mhz).value == doctest::Approx(2100.0));
  CHECK(s.at(reading::memory_total_bytes).value == doctest::Approx(17079205888.0));
  CHECK(s.at(reading::memory_used_bytes).value == doctest::Approx(17079205888.0 - 16106127360.0));
  CHECK_FALSE(s.at(reading::power_w).value);  // the first energy reading
}

TEST_CASE("power from energy between samples: Sysman's counter where the driver has no hwmon, hwmon's otherwise") {
  // The A770 tree without its hwmon directory: Sysman's energy counter (95 J per 1 s) gives the power.
  TempDir tmp("accelkit-xpu-power");
  fs::copy(fixture("arc-a770") + "/sys", tmp.path() / "sys", fs::copy_options::recursive);
  fs::remove_all(tmp.path() / "sys/class/drm/card0/device/hwmon");
  {
    XpuProbe p = probe(tmp.str(), fixture("arc-a770/level_zero.conf"));
    REQUIRE(p.gpus.size() == 1);
    XpuMonitor mon(p.gpus[0], p.level_zero.sysman);
    CHECK_FALSE(sample(mon).at(reading::power_w).value);
    auto second = sample(mon);
    REQUIRE(second.at(reading::power_w).value);
    CHECK(*second.at(reading::power_w).value == doctest::Approx(95.0));
    CHECK(contains(second.at(reading::power_w).source, "Sysman"));
  }

  // hwmon's energy1_input, rewritten between samples; then going backwards (a wrap or reset).
  const fs::path energy = tmp.path() / "hwmon-tree/sys/class/drm/card0/device/hwmon/hwmon3/energy1_input";
  fs::copy(fixture("arc-a770") + "/sys", tmp.make_dir("hwmon-tree") / "sys", fs::copy_options::recursive);
  XpuProbe p = probe((tmp.path() / "hwmon-tree").string(), "");
  XpuMonitor mon(p.gpus[0], nullptr);
  write_file(energy, "1000000000\n");
  CHECK_FALSE(sample(mon).at(reading::power_w).value);
  write_file(energy, "1000500000\n");
  auto up = sample(mon);
  REQUIRE(up.at(reading::power_w).value);
  CHECK(*up.at(reading::power_w).value > 0.0);
  CHECK(contains(up.at(reading::power_w).source, "energy1_input"));
  write_file(energy, "5\n");
  auto back = sample(mon);
  CHECK_FALSE(back.at(reading::power_w).value);
  CHECK(contains(back.at(reading::power_w).note, "backwards"));
}

TEST_CASE("Data Center GPU Max 1550 on xe: two stacks, one device each, on one card; bf16 and TF32") {
  XpuProbe p = probe(fixture("max-1550"), fixture("max-1550/level_zero.conf"));
  REQUIRE(p.gpus.size() == 2);
  for (const XpuGpu& g : p.gpus) {
    REQUIRE(g.card);
    CHECK(g.card->driver == "xe");
    CHECK(g.card->tiles == 2);
    CHECK(g.card->vram_bytes == 137438953472ull);
    CHECK(g.memory_bytes() == 68719476736ull);  // each stack's share
    CHECK(g.rules.arch == XeArch::xe_hpc);
  }
  CHECK(p.gpus[0].ze_index == 0);
  CHECK(p.gpus[1].ze_index == 1);

  XpuReport r = make_xpu_report(p, with_xpu(2));
  CHECK(r.score == 100);
  REQUIRE(r.devices.size() == 2);
  CHECK(r.devices[1].id == "xpu:1");
  CHECK(r.devices[1].torch_device == "xpu:1");
  CHECK(r.devices[0].capabilities.has(Capability::tf32));
  CHECK(r.devices[0].capabilities.has(Capability::thermal));  // xe's temp2_input
  CHECK(prop(r.devices[0], "tiles") == "2");

  XpuMonitor mon(p.gpus[0], p.level_zero.sysman);
  auto s = sample(mon);
  CHECK(s.at(reading::temperature_c).value == doctest::Approx(57.0));
  CHECK(contains(s.at(reading::temperature_c).source, "temp2_input"));
  CHECK(s.at(reading::clock_mhz).value == doctest::Approx(1600.0));
  CHECK(s.at(reading::power_limit_w).value == doctest::Approx(600.0));
  // xe has no free-memory file: Sysman's memory modules give it.
  CHECK(s.at(reading::memory_total_bytes).value == doctest::Approx(68719476736.0));
  CHECK(s.at(reading::memory_used_bytes).value == doctest::Approx(68719476736.0 - 64424509440.0));
}

TEST_CASE("Core Ultra iGPU (Meteor Lake, Xe-LPG): integrated, fp16 only, sensors from Sysman") {
  XpuProbe p = probe(fixture("core-ultra"), fixture("core-ultra/level_zero.conf"));
  REQUIRE(p.gpus.size() == 1);
  const XpuGpu& g = p.gpus[0];
  CHECK(g.integrated());
  CHECK(g.rules.arch == XeArch::xe_lpg);
  CHECK_FALSE(g.card->vram_bytes);
  CHECK(g.card->hwmon_dir.empty());
  CHECK(g.card->tiles == 1);  // gt1 is Meteor Lake's media GT, not a tile
  XpuReport r = make_xpu_report(p, with_xpu(1));
  const DeviceInfo& d = r.devices[0];
  CHECK(d.kind == DeviceKind::integrated_gpu);
  CHECK(d.capabilities.has(Capability::fp16));
  CHECK_FALSE(d.capabilities.has(Capability::bf16));
  CHECK(prop(d, "XMX") == "no");

  XpuMonitor mon(g, p.level_zero.sysman);
  auto s = sample(mon);
  CHECK(s.at(reading::temperature_c).value == doctest::Approx(45.0));
  CHECK(s.at(reading::clock_mhz).value == doctest::Approx(1100.0));  // i915's gt_act_freq_mhz
  CHECK_FALSE(s.at(reading::memory_total_bytes).value);
  CHECK(contains(s.at(reading::memory_total_bytes).note, "integrated"));
  CHECK_FALSE(s.at(reading::power_w).value);
}

TEST_CASE("no Intel GPU: nothing listed, and why") {
  XpuProbe p = probe(fixture("none"), "");
  CHECK(p.gpus.empty());
  XpuReport r = make_xpu_report(p, with_xpu(0));
  CHECK(r.score == 0);
  CHECK(r.devices.empty());
  CHECK(contains(r.reasons.front(), "no Intel GPU"));
}

TEST_CASE("malformed sysfs values are refused, not trusted; a card passed through to a VM is skipped") {
  XpuProbe p = probe(fixture("bad"), "");
  REQUIRE(p.gpus.size() == 1);  // card1 is on vfio-pci
  CHECK(any_contains(p.notes, "vfio-pci"));
  const XpuGpu& g = p.gpus[0];
  CHECK_FALSE(g.card->vram_bytes);  // lmem_total_bytes holds "lots"
  CHECK(any_contains(p.warnings, "lots"));
  XpuMonitor mon(g, nullptr);
  auto s = sample(mon);
  CHECK_FALSE(s.at(reading::power_w).value);  // energy1_input holds -5
  CHECK(contains(s.at(reading::power_w).note, "-5"));
  auto m = xpu_memory("xpu:0", g, std::nullopt, std::nullopt, kNoXpu);
  REQUIRE_FALSE(m.ok());
  CHECK(contains(m.status().message(), "lots"));
}

TEST_CASE("malformed Level Zero answers are refused: a changed stype, a name without NUL, impossible counts") {
  XpuProbe p = probe(fixture("none"), fixture("bad/level_zero.conf"));
  REQUIRE(p.level_zero.initialised);
  CHECK(p.gpus.empty());
  CHECK(any_contains(p.warnings, "stype"));
  CHECK(any_contains(p.warnings, "without its NUL"));
  CHECK(any_contains(p.notes, "not an Intel GPU"));

  XpuProbe lie = probe(fixture("none"), fixture("bad/level_zero_count.conf"));
  CHECK(lie.gpus.empty());
  CHECK(any_contains(lie.warnings, "100000"));

  XpuProbe init = probe(fixture("arc-a770"), fixture("bad/level_zero_init.conf"));
  CHECK_FALSE(init.level_zero.initialised);
  CHECK(contains(init.level_zero.error, "zeInit returned 0x78000001"));
  REQUIRE(init.gpus.size() == 1);  // sysfs still lists the card
  XpuReport r = make_xpu_report(init, with_xpu(1));
  CHECK(r.score == 0);
  CHECK(contains(r.unusable[0], "Level Zero does not list it"));

  XpuProbe missing = [] {
    ScopedEnv sysfs("ACCELKIT_SYSFS_ROOT", fixture("arc-a770") + "/sys");
    ProbeOptions o;
    o.level_zero.libraries = {"libaccelkit-no-such-loader.so.1"};
    return probe_xpu(o);
  }();
  CHECK_FALSE(missing.level_zero.loaded);
  XpuReport mr = make_xpu_report(missing, no_xpu());
  CHECK(any_contains(mr.reasons, "no Level Zero loader"));
}
