// The ROCm probe, report, monitor and memory figures against fixture sysfs trees
// (ACCELKIT_SYSFS_ROOT): an RX 5600 XT (RDNA1), an Instinct MI210 (CDNA2), an RX 7900 XTX
// (RDNA3, power1_input only, behind an Intel iGPU) and a machine with no AMD GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "device_memory.hpp"
#include "device_report.hpp"
#include "rocm_monitor.hpp"
#include "rocm_probe.hpp"
#include "test_support.hpp"

using namespace accelkit;
using namespace accelkit::rocm;
using accelkit::test::contains;
using accelkit::test::ScopedEnv;
using accelkit::test::TempDir;
using accelkit::test::write_file;

namespace {

std::string root(const char* name) { return std::string(ACCELKIT_TEST_FIXTURES) + "/rocm/" + name + "/sys"; }

RocmProbe probe_fixture(const char* name) {
  ScopedEnv sysfs("ACCELKIT_SYSFS_ROOT", root(name));
  ProbeOptions o;
  o.load_libraries = false;  // fixture trees, not this machine's ROCm install
  return probe_rocm(o);
}

TorchBackend cpu_torch() { return TorchBackend{false, "no libtorch_hip", 0, false}; }
// A ROCm LibTorch seeing `n` devices; `allocator`: the plugin was built against its c10_hip.
TorchBackend rocm_torch(int n, bool allocator = true) {
  return TorchBackend{true, "libtorch_hip.so loaded", n, allocator};
}

// A fixture file's byte count, as the test reads it (not through the plugin's reader).
std::uint64_t fixture_bytes(const std::string& path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  REQUIRE_MESSAGE(static_cast<bool>(in >> v), "cannot read " << path);
  return v;
}

std::string prop(const DeviceInfo& d, const std::string& key) {
  for (const auto& [k, v] : d.properties)
    if (k == key) return v;
  return "";
}

std::map<std::string, Reading> sample(const AmdgpuCard& card) {
  RocmMonitor m(card);
  auto r = m.sample();
  REQUIRE(r.ok());
  std::map<std::string, Reading> out;
  for (const auto& reading : r.value()) out[reading.key] = reading;
  return out;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& needle) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(needle) != std::string::npos; });
}

}  // namespace

TEST_CASE("RX 5600 XT (gfx1010, RDNA1): fp32 only, FFT routed to CPU, hipBLASLt off") {
  RocmProbe p = probe_fixture("rdna1");
  REQUIRE(p.kfd_present);
  REQUIRE(p.gpus.size() == 1);
  const RocmGpu& g = p.gpus[0];
  REQUIRE(g.kfd);
  REQUIRE(g.card);
  REQUIRE(g.gfx);
  CHECK(g.gfx->name() == "gfx1010");
  CHECK(g.card->pci_address == "0000:03:00.0");
  CHECK(g.kfd->pci_address == "0000:03:00.0");
  CHECK(g.card->device_id == 0x731f);
  CHECK(g.card->vram_total_bytes == 6442450944ull);
  CHECK(g.card->power_file == "power1_average");
  CHECK(g.rules.fft_on_cpu);
  REQUIRE(g.preset);
  CHECK(g.preset->name.find("6GB") == 0);
  CHECK(g.preset->model_width == 384);  // the RX 5600 XT entry of presets.toml

  RocmReport r = make_rocm_report(p, cpu_torch());
  CHECK(r.score == 0);
  REQUIRE(r.devices.size() == 1);
  const DeviceInfo& d = r.devices[0];
  CHECK(d.id == "rocm:0");
  CHECK(d.torch_device.empty());
  CHECK(d.name == "AMD GPU [1002:731f]");
  CHECK(d.kind == DeviceKind::discrete_gpu);
  CHECK(d.capabilities.has(Capability::fp32));
  CHECK_FALSE(d.capabilities.has(Capability::bf16));
  CHECK_FALSE(d.capabilities.has(Capability::fp16));
  CHECK(d.capabilities.has(Capability::thermal));
  CHECK(d.capabilities.has(Capability::power));
  CHECK(d.capabilities.has(Capability::memory_stats));
  CHECK(d.capabilities.extra.at("route.fft") == "cpu");
  CHECK(d.capabilities.extra.at("route.fft.why").find("gfx1010") != std::string::npos);
  CHECK(prop(d, "hipBLASLt").find("off") == 0);
  CHECK(prop(d, "memory fraction") == "0.80");
  CHECK(prop(d, "preset model_width") == "384");
  CHECK_FALSE(d.warnings.empty());
  REQUIRE_FALSE(r.reasons.empty());
  CHECK(r.reasons.front().rfind(kNotRocmBuild, 0) == 0);

  auto s = sample(*g.card);
  CHECK(s.at(reading::temperature_c).value == doctest::Approx(52.0));
  CHECK(s.at(reading::power_w).value == doctest::Approx(95.0));
  CHECK(s.at(reading::power_w).source.find("power1_average") != std::string::npos);
  CHECK(s.at(reading::power_limit_w).value == doctest::Approx(150.0));
  CHECK(s.at(reading::utilisation_pct).value == doctest::Approx(37.0));
  CHECK(s.at(reading::memory_used_bytes).value == doctest::Approx(1288490188.0));
  CHECK(s.at(reading::memory_total_bytes).value == doctest::Approx(6442450944.0));
  CHECK(s.at(reading::clock_mhz).value == doctest::Approx(1750.0));
  CHECK(s.at(reading::memory_clock_mhz).value == doctest::Approx(875.0));
}

TEST_CASE("Instinct MI210 (gfx90a, CDNA2): bf16; usable only with a ROCm LibTorch") {
  RocmProbe p = probe_fixture("mi210");
  REQUIRE(p.gpus.size() == 1);
  CHECK(p.gpus[0].gfx->name() == "gfx90a");
  CHECK(p.gpus[0].rules.dtype == Dtype::bf16);

  RocmReport cpu = make_rocm_report(p, cpu_torch());
  CHECK(cpu.score == 0);
  const DeviceInfo& d = cpu.devices.at(0);
  CHECK(d.name == "AMD Instinct MI210");
  CHECK(d.capabilities.has(Capability::bf16));
  CHECK(d.capabilities.has(Capability::fp16));
  CHECK(d.capabilities.extra.count("route.fft") == 0);
  CHECK(d.capabilities.extra.at("gfx") == "gfx90a");
  CHECK(d.capabilities.extra.at("arch") == "CDNA2");
  CHECK(prop(d, "pci_bus_id") == "0000:c3:00.0");
  CHECK(prop(d, "preset").find("64GB+") == 0);
  CHECK(cpu.reasons.front().find("1 AMD GPU listed and monitored") != std::string::npos);
  CHECK(any_contains(cpu.warnings, "ROCm build of LibTorch"));
  CHECK(any_contains(cpu.reasons, "no HIP runtime"));

  // The same tree with a ROCm LibTorch that sees one device: usable as cuda:0.
  RocmReport rocm = make_rocm_report(p, rocm_torch(1));
  CHECK(rocm.score > 0);
  CHECK(rocm.devices.at(0).torch_device == "cuda:0");
  CHECK(rocm.torch_index.at(0) == 0);
  // ... and one that sees none: score 0, with what to check.
  RocmReport none = make_rocm_report(p, rocm_torch(0));
  CHECK(none.score == 0);
  CHECK(none.reasons.front().find("/dev/kfd") != std::string::npos);
  // HIP enumerated devices by PCI bus id: matched by address, not by order.
  p.hip.pci_bus_ids = {"0000:01:00.0", "0000:c3:00.0"};
  RocmReport by_pci = make_rocm_report(p, rocm_torch(2));
  CHECK(by_pci.devices.at(0).torch_device == "cuda:1");

  auto s = sample(*p.gpus[0].card);
  CHECK(s.at(reading::power_w).value == doctest::Approx(43.0));
  CHECK(s.at(reading::clock_mhz).value == doctest::Approx(800.0));
  CHECK(s.at(reading::memory_total_bytes).value == doctest::Approx(68702699520.0));
}

TEST_CASE("RX 7900 XTX (gfx1100, RDNA3): only power1_input; the Intel iGPU and connectors skipped") {
  RocmProbe p = probe_fixture("rdna3");
  REQUIRE(p.gpus.size() == 1);
  const RocmGpu& g = p.gpus[0];
  REQUIRE(g.card);
  CHECK(g.card->card == "card1");
  CHECK(g.card->pci_address.empty());           // no uevent in this tree
  CHECK(g.card->render_minor == 129);           // matched to KFD by render node
  CHECK(g.pci_address() == "0000:0b:00.0");     // from KFD's location_id
  CHECK(g.gfx->name() == "gfx1100");
  CHECK(g.rules.dtype == Dtype::bf16);
  CHECK(g.card->power_file == "power1_input");
  CHECK(g.preset->name == "24GB");

  auto s = sample(*g.card);
  CHECK(s.at(reading::power_w).value == doctest::Approx(312.0));
  CHECK(s.at(reading::power_w).source.find("power1_input") != std::string::npos);
  CHECK(s.at(reading::temperature_c).value == doctest::Approx(63.0));
  CHECK(s.at(reading::utilisation_pct).value == doctest::Approx(99.0));
  CHECK(s.at(reading::clock_mhz).value == doctest::Approx(2482.0));
}

TEST_CASE("no AMD GPU: nothing listed, score 0, says why") {
  RocmProbe p = probe_fixture("no_amd");
  CHECK_FALSE(p.kfd_present);
  CHECK(p.gpus.empty());
  RocmReport r = make_rocm_report(p, rocm_torch(1));
  CHECK(r.score == 0);
  CHECK(r.devices.empty());
  REQUIRE(r.reasons.size() == 1);
  CHECK(r.reasons.front().find("no AMD GPU") == 0);
}

TEST_CASE("a missing sensor reads as n/a with a note") {
  RocmProbe p = probe_fixture("rdna1");
  AmdgpuCard card = *p.gpus.at(0).card;
  card.hwmon_dir.clear();
  card.power_file.clear();
  card.device_dir += "/nonexistent";
  auto s = sample(card);
  for (const char* key : {reading::temperature_c, reading::power_w, reading::utilisation_pct,
                          reading::memory_used_bytes, reading::clock_mhz}) {
    CAPTURE(key);
    CHECK_FALSE(s.at(key).value);
    CHECK(s.at(key).note.rfind("n/a", 0) == 0);
  }
}

TEST_CASE("memory figures without LibTorch's allocator: the card's VRAM from sysfs, equal to the files") {
  for (const char* tree : {"rdna1", "mi210", "rdna3"}) {
    CAPTURE(tree);
    RocmProbe p = probe_fixture(tree);
    REQUIRE(p.gpus.size() == 1);
    REQUIRE(p.gpus[0].card);
    const std::string dir = p.gpus[0].card->device_dir;
    const std::uint64_t total = fixture_bytes(dir + "/mem_info_vram_total");
    const std::uint64_t used = fixture_bytes(dir + "/mem_info_vram_used");
    REQUIRE(used < total);

    auto m = rocm_memory("rocm:0", p.gpus[0].card, std::nullopt, kNotRocmBuild);
    REQUIRE_MESSAGE(m.ok(), m.status().message());
    CHECK(m.value().total == total);
    CHECK(m.value().available == total - used);
    CHECK_FALSE(m.value().in_use);
    CHECK_FALSE(m.value().peak);
    CHECK_FALSE(m.value().reserved);
    CHECK(contains(m.value().source, dir));
    CHECK(contains(m.value().source, "mem_info_vram_used"));
    CHECK(contains(m.value().source, std::string("no allocator figures: ") + kNotRocmBuild));
    CHECK(contains(m.value().note, std::to_string(used) + " bytes of VRAM in use by all processes"));
    // The monitor reads the same files.
    auto s = sample(*p.gpus[0].card);
    CHECK(s.at(reading::memory_used_bytes).value == doctest::Approx(static_cast<double>(used)));
    CHECK(s.at(reading::memory_total_bytes).value == doctest::Approx(static_cast<double>(total)));
    // The device the report lists claims memory figures: they are there.
    CHECK(make_rocm_report(p, cpu_torch()).devices.at(0).capabilities.has(Capability::memory_stats));
  }
}

TEST_CASE("memory figures with LibTorch's allocator: in use, peak and reserved from it; total, available from sysfs") {
  RocmProbe p = probe_fixture("mi210");
  const AmdgpuCard& card = *p.gpus.at(0).card;
  const std::uint64_t total = fixture_bytes(card.device_dir + "/mem_info_vram_total");
  const std::uint64_t used = fixture_bytes(card.device_dir + "/mem_info_vram_used");
  const AllocatorFigures allocator{3ull << 30, 5ull << 30, 6ull << 30};
  auto m = rocm_memory("rocm:0", card, allocator, "");
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  CHECK(m.value().in_use == (3ull << 30));
  CHECK(m.value().peak == (5ull << 30));
  CHECK(m.value().reserved == (6ull << 30));
  CHECK(m.value().total == total);
  CHECK(m.value().available == total - used);
  CHECK(m.value().source.rfind("LibTorch's HIP caching allocator", 0) == 0);
  CHECK(contains(m.value().source, "mem_info_vram_total"));
  CHECK(contains(m.value().note, "rocm:0"));

  // A GPU only KFD shows: the allocator's figures alone.
  auto kfd_only = rocm_memory("rocm:1", std::nullopt, allocator, "");
  REQUIRE(kfd_only.ok());
  CHECK(kfd_only.value().in_use == (3ull << 30));
  CHECK_FALSE(kfd_only.value().total);
  CHECK_FALSE(kfd_only.value().available);
  CHECK(contains(kfd_only.value().note, "rocm:1 has no amdgpu sysfs directory"));
}

TEST_CASE("memory figures: a VRAM file that cannot be read; without the allocator, unavailable and why") {
  RocmProbe p = probe_fixture("mi210");
  TempDir tmp("accelkit-rocm-vram");
  AmdgpuCard card = *p.gpus.at(0).card;
  card.device_dir = tmp.str();

  // Nothing readable and no allocator: unavailable, naming both files and the reason.
  auto none = rocm_memory("rocm:0", card, std::nullopt, kNotRocmBuild);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == StatusCode::unavailable);
  CHECK(contains(none.status().message(), kNotRocmBuild));
  CHECK(contains(none.status().message(), "cannot read " + tmp.str() + "/mem_info_vram_total"));
  CHECK(contains(none.status().message(), "cannot read " + tmp.str() + "/mem_info_vram_used"));
  auto no_card = rocm_memory("rocm:0", std::nullopt, std::nullopt, kNotRocmBuild);
  REQUIRE_FALSE(no_card.ok());
  CHECK(contains(no_card.status().message(), "no amdgpu sysfs directory"));

  // The total alone says no more than DeviceInfo::memory_bytes: still unavailable, naming the other file.
  write_file(tmp.path() / "mem_info_vram_total", "8589934592\n");
  auto total_only = rocm_memory("rocm:0", card, std::nullopt, kNotRocmBuild);
  REQUIRE_FALSE(total_only.ok());
  CHECK(contains(total_only.status().message(), "cannot read " + tmp.str() + "/mem_info_vram_used"));
  CHECK_FALSE(contains(total_only.status().message(), "mem_info_vram_total"));
  // ... and with the allocator's figures, the total and the missing file in the note.
  auto with_allocator = rocm_memory("rocm:0", card, AllocatorFigures{1, 2, 3}, "");
  REQUIRE(with_allocator.ok());
  CHECK(with_allocator.value().total == 8589934592ull);
  CHECK_FALSE(with_allocator.value().available);
  CHECK(contains(with_allocator.value().note, "cannot read " + tmp.str() + "/mem_info_vram_used"));

  // More in use than the total (a driver mid-update): nothing available, never a wrapped number.
  write_file(tmp.path() / "mem_info_vram_used", "8589934593\n");
  auto over = rocm_memory("rocm:0", card, std::nullopt, kNotRocmBuild);
  REQUIRE(over.ok());
  CHECK(over.value().available == 0u);
  // Not a byte count: as good as missing.
  write_file(tmp.path() / "mem_info_vram_used", "-1\n");
  auto negative = rocm_memory("rocm:0", card, std::nullopt, kNotRocmBuild);
  REQUIRE_FALSE(negative.ok());
  CHECK(contains(negative.status().message(), "cannot read " + tmp.str() + "/mem_info_vram_used"));
}

TEST_CASE("memory_stats is claimed only where memory() has figures") {
  RocmProbe p = probe_fixture("mi210");
  auto claims = [&](const TorchBackend& torch) {
    return make_rocm_report(p, torch).devices.at(0).capabilities.has(Capability::memory_stats);
  };
  CHECK(claims(cpu_torch()));
  CHECK(claims(rocm_torch(1)));
  // No mem_info_vram_used: available cannot be known from sysfs.
  p.gpus[0].card->has_vram_used = false;
  CHECK_FALSE(claims(cpu_torch()));
  CHECK(claims(rocm_torch(1)));                             // the allocator's figures
  CHECK_FALSE(claims(rocm_torch(1, /*allocator=*/false)));  // built without c10_hip
  CHECK_FALSE(claims(rocm_torch(0)));                       // LibTorch does not see it
  // Only KFD shows it: no sysfs figures at all.
  p.gpus[0].card.reset();
  CHECK_FALSE(claims(cpu_torch()));
  CHECK(claims(rocm_torch(1)));
}
