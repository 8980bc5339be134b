// probe_cpu and make_cpu_report against fixture /proc and /sys trees (tests/fixtures/cpu),
// with cpuid values recorded on the matching CPUs; and once on this machine.
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "device_info.hpp"
#include "probe.hpp"

using namespace accelkit;
using namespace accelkit::cpu;

namespace {

// Points ACCELKIT_SYSFS_ROOT/ACCELKIT_PROCFS_ROOT at a fixture for the scope.
struct FixtureRoots {
  explicit FixtureRoots(const std::string& name) {
    const std::string base = std::string(ACCELKIT_TEST_FIXTURES) + "/cpu/" + name;
    ::setenv("ACCELKIT_SYSFS_ROOT", (base + "/sys").c_str(), 1);
    ::setenv("ACCELKIT_PROCFS_ROOT", (base + "/proc").c_str(), 1);
  }
  ~FixtureRoots() {
    ::unsetenv("ACCELKIT_SYSFS_ROOT");
    ::unsetenv("ACCELKIT_PROCFS_ROOT");
  }
};

// Intel Core i7-7700K (Kaby Lake): AVX2, no AVX-512.
CpuidSnapshot kaby_lake() {
  CpuidSnapshot s;
  s.leaves.max_leaf = 0x16;
  s.leaves.leaf1_ecx = 0x7FFAFBBF;
  s.leaves.leaf7_ebx = 0x029C6FBF;
  s.xcr0 = 0x1F;
  s.vendor_id = "GenuineIntel";
  s.brand = "Intel(R) Core(TM) i7-7700K CPU @ 4.20GHz";
  return s;
}

// AMD Zen 4: AVX-512 with AVX512_BF16.
CpuidSnapshot zen4() {
  CpuidSnapshot s;
  s.leaves.max_leaf = 0x10;
  s.leaves.leaf1_ecx = 0x7ED8320B;
  s.leaves.leaf7_max_subleaf = 1;
  s.leaves.leaf7_ebx = 0xF1BF97A9;
  s.leaves.leaf7_ecx = 0x00405FCE;
  s.leaves.leaf7_edx = 0x10000010;
  s.leaves.leaf7_1_eax = 0x20;
  s.xcr0 = 0x2E7;
  s.vendor_id = "AuthenticAMD";
  return s;
}

bool has_property(const DeviceInfo& d, const std::string& key, const std::string& value) {
  for (const auto& [k, v] : d.properties)
    if (k == key && v == value) return true;
  return false;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("Intel fixture: identity, cores, memory, sensors, reference BLAS") {
  FixtureRoots roots("intel");
  CpuProbe p = probe_cpu(kaby_lake(), host::read_file);
  CHECK(p.vendor == "Intel");
  CHECK(p.model == "Intel(R) Core(TM) i7-7700K CPU @ 4.20GHz");
  CHECK(p.logical_cores == 8);
  CHECK(p.physical_cores == 4);
  CHECK(p.sockets == 1);
  CHECK(p.numa_nodes == 1);
  CHECK(p.memory_bytes == 32734504ull * 1024);
  CHECK(isa_list(p.isa) == "avx2");
  CHECK(p.blas.kind == BlasKind::reference);
  CHECK(p.sensors.temperature == "hwmon coretemp Package id 0");
  CHECK(p.sensors.power == "RAPL package-0");
  CHECK(p.sensors.power_readable);
  CHECK(p.sensors.utilisation);

  CpuReport r = make_cpu_report(p);
  CHECK(r.score > 0);
  const DeviceInfo& d = r.device;
  CHECK(d.id == "cpu:0");
  CHECK(d.torch_device == "cpu");
  CHECK(d.kind == DeviceKind::cpu);
  CHECK(d.name == p.model);
  CHECK(d.memory_bytes == p.memory_bytes);
  CHECK(d.capabilities.has(Capability::fp32));
  CHECK_FALSE(d.capabilities.has(Capability::bf16));
  CHECK(d.capabilities.has(Capability::thermal));
  CHECK(d.capabilities.has(Capability::power));
  CHECK(d.capabilities.has(Capability::utilisation));
  CHECK(d.capabilities.extra.at("isa") == "avx2");
  CHECK(d.capabilities.extra.at("align.fp32") == "8");  // AVX2: 8 fp32 per vector
  CHECK(d.capabilities.has("avx2"));
  CHECK_FALSE(d.capabilities.has("avx512_bf16"));
  CHECK(has_property(d, "physical cores", "4"));
  CHECK(has_property(d, "logical cores", "8"));
  CHECK(has_property(d, "NUMA nodes", "1"));
  REQUIRE(r.warnings.size() == 1);
  CHECK(contains(r.warnings[0], "reference BLAS"));
  CHECK(contains(r.warnings[0], "apt-get install libopenblas0-openmp"));
  CHECK(d.warnings == r.warnings);
}

TEST_CASE("AMD fixture: Zen 4 gets bf16, k10temp Tccd, OpenBLAS") {
  FixtureRoots roots("amd");
  CpuProbe p = probe_cpu(zen4(), host::read_file);
  CHECK(p.vendor == "AMD");
  CHECK(p.model == "AMD Ryzen 9 7950X 16-Core Processor");
  CHECK(p.logical_cores == 32);
  CHECK(p.physical_cores == 16);
  CHECK(p.numa_nodes == 1);
  CHECK(p.memory_bytes == 65536000ull * 1024);
  CHECK(p.blas.kind == BlasKind::openblas);
  CHECK(p.blas.name == "openblas-pthread");
  CHECK(p.sensors.temperature == "hwmon k10temp Tccd1,Tccd2");

  CpuReport r = make_cpu_report(p);
  CHECK(r.device.capabilities.has(Capability::bf16));
  CHECK(r.device.capabilities.has("avx512_bf16"));
  CHECK_FALSE(r.device.capabilities.has("amx_bf16"));
  CHECK(r.device.capabilities.extra.at("isa") == "avx2,avx512f,avx512bw,avx512_bf16");
  CHECK(r.device.capabilities.extra.at("align.fp32") == "16");  // AVX-512: 16 fp32 per vector
  CHECK(r.device.capabilities.extra.at("align.bf16") == "32");
  CHECK(r.device.capabilities.extra.at("align.int8") == "64");
  CHECK(r.device.capabilities.extra.at("blas") == "openblas-pthread");
  CHECK(r.warnings.empty());
  CHECK(contains(r.reasons.at(1), "AVX512_BF16"));
}

TEST_CASE("int8 Linear: the engine from LibTorch's list, 7-bit activations only without VNNI-class int8") {
  IsaFlags avx2;
  avx2.avx2 = true;
  IsaFlags zen4 = avx2;
  zen4.avx512f = zen4.avx512bw = zen4.avx512_bf16 = true;

  Int8Choice c = choose_int8({"qnnpack", "onednn", "x86", "fbgemm"}, avx2);
  CHECK(c.engine == "x86");
  CHECK(c.reduce_range);  // FBGEMM on AVX2 would saturate 16-bit sums
  CHECK(contains(c.why, "7 bits"));
  c = choose_int8({"qnnpack", "onednn", "x86", "fbgemm"}, zen4);
  CHECK(c.engine == "x86");
  CHECK_FALSE(c.reduce_range);
  c = choose_int8({"fbgemm", "qnnpack"}, avx2);
  CHECK(c.engine == "fbgemm");
  CHECK(c.reduce_range);
  c = choose_int8({"onednn", "qnnpack"}, avx2);  // Debian's LibTorch 1.13
  CHECK(c.engine == "onednn");
  CHECK(c.reduce_range);  // oneDNN's AVX2 int8 GEMM saturates the same way
  c = choose_int8({"onednn", "qnnpack"}, zen4);
  CHECK(c.engine == "onednn");
  CHECK_FALSE(c.reduce_range);  // VNNI: 32-bit sums
  c = choose_int8({"qnnpack"}, zen4);
  CHECK(c.engine.empty());
  CHECK(contains(c.why, "(qnnpack) are for ARM"));
  c = choose_int8({}, zen4);
  CHECK(c.engine.empty());
  CHECK(contains(c.why, "no quantized engine"));

  CpuProbe p;
  p.isa = zen4;
  p.quantized_engines = {"onednn", "qnnpack"};
  CpuReport r = make_cpu_report(p);
  CHECK(r.device.capabilities.has(Capability::int8_linear));
  CHECK(r.device.capabilities.extra.at(kInt8EngineKey) == "onednn");
  CHECK(r.device.capabilities.extra.at(kInt8ReduceRangeKey) == "false");
  CHECK(std::any_of(r.reasons.begin(), r.reasons.end(), [](const std::string& x) { return contains(x, "int8 Linear"); }));
  p.quantized_engines = {"qnnpack"};
  r = make_cpu_report(p);
  CHECK_FALSE(r.device.capabilities.has(Capability::int8_linear));
  CHECK(r.device.capabilities.extra.count(kInt8EngineKey) == 0);
}

TEST_CASE("no-sensors fixture: sysfs topology, no NUMA, no sensors, no BLAS visible") {
  FixtureRoots roots("nosensors");
  CpuProbe p = probe_cpu(CpuidSnapshot{}, host::read_file);
  CHECK(p.vendor.empty());
  CHECK(p.model.empty());
  CHECK(p.logical_cores == 4);
  CHECK(p.physical_cores == 2);  // sysfs core_id 0,1,0,1 in package 0
  CHECK(p.numa_nodes == 0);
  CHECK(p.memory_bytes == 8000000ull * 1024);
  CHECK(p.blas.kind == BlasKind::not_found);
  CHECK(p.sensors.temperature.empty());
  CHECK(p.sensors.power.empty());

  CpuReport r = make_cpu_report(p);
  CHECK(r.score > 0);
  CHECK(r.device.name == "CPU");
  CHECK(r.device.capabilities.has(Capability::fp32));
  CHECK(r.device.capabilities.has(Capability::utilisation));
  CHECK_FALSE(r.device.capabilities.has(Capability::thermal));
  CHECK_FALSE(r.device.capabilities.has(Capability::power));
  CHECK_FALSE(r.device.capabilities.has(Capability::bf16));
  CHECK(r.device.capabilities.extra.at("isa").empty());
  CHECK(has_property(r.device, "NUMA nodes", "unknown"));
  CHECK(r.warnings.empty());
}

TEST_CASE("no model name in cpuinfo: the cpuid brand string is used") {
  FixtureRoots roots("nosensors");
  CpuidSnapshot s = kaby_lake();
  CpuProbe p = probe_cpu(s, host::read_file);
  CHECK(p.model == s.brand);
  CHECK(p.vendor == "Intel");
}

TEST_CASE("RAPL unreadable: power sensor listed but not a capability") {
  // Root (which runs CI) reads mode-000 files anyway, so the reader reports EACCES for
  // energy_uj the way the kernel does for non-root users since Linux 5.10.
  FixtureRoots roots("rapl_denied");
  host::FileReader denied = [](const std::string& path) {
    if (path.size() >= 10 && path.compare(path.size() - 10, 10, "/energy_uj") == 0)
      return host::ReadResult{{}, EACCES};
    return host::read_file(path);
  };
  CpuProbe p = probe_cpu(zen4(), denied);
  CHECK(p.logical_cores == 16);
  CHECK(p.physical_cores == 8);
  CHECK(p.sensors.power == "RAPL package-0");
  CHECK_FALSE(p.sensors.power_readable);
  CHECK(p.sensors.temperature == "hwmon k10temp Tctl");
  CpuReport r = make_cpu_report(p);
  CHECK_FALSE(r.device.capabilities.has(Capability::power));
  CHECK(r.device.capabilities.has(Capability::thermal));
  CHECK(has_property(r.device, "power sensor", "RAPL package-0 (not readable: root-only)"));
}

TEST_CASE("this machine: the real probe works and agrees with the kernel's cpu flags") {
  ::unsetenv("ACCELKIT_SYSFS_ROOT");
  ::unsetenv("ACCELKIT_PROCFS_ROOT");
  CpuProbe p = probe_cpu();
  CHECK(p.logical_cores >= 1);
  CHECK(p.physical_cores >= 1);
  CHECK(p.physical_cores <= p.logical_cores);
  CHECK(p.memory_bytes > 0);
  CpuReport r = make_cpu_report(p);
  CHECK(r.score > 0);
  CHECK(r.device.capabilities.has(Capability::fp32));
  MESSAGE("isa: " << isa_list(p.isa) << "; blas: " << p.blas.name << "; model: " << p.model);

#if defined(__x86_64__)
  // Every extension decode_isa accepts must also be in the kernel's flags (same spelling).
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      flags = " " + line.substr(line.find(':') + 1) + " ";
      break;
    }
  REQUIRE_FALSE(flags.empty());
  for (const auto& [name, on] : isa_entries(p.isa)) {
    INFO(name);
    if (on) CHECK(contains(flags, " " + name + " "));
  }
  // The kernel hides AVX/AVX-512 flags exactly when XCR0 lacks their state.
  CHECK(p.isa.avx2 == contains(flags, " avx2 "));
  CHECK(p.isa.avx512f == contains(flags, " avx512f "));
#endif
}
