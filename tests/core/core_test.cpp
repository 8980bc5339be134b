// SDK value types and the core's small pieces: Status/Result/capture, capabilities, PCI scan.
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "accelkit/sdk/capability.hpp"
#include "accelkit/negotiation.hpp"
#include "accelkit/pci.hpp"
#include "accelkit/sdk/status.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace core_suite {

using namespace accelkit;

namespace {
struct SysfsRoot {
  explicit SysfsRoot(const std::string& dir) { ::setenv("ACCELKIT_SYSFS_ROOT", dir.c_str(), 1); }
  ~SysfsRoot() { ::unsetenv("ACCELKIT_SYSFS_ROOT"); }
};
}  // namespace

TEST_CASE("capture turns exceptions into a Status with the first line of what()") {
  Status s = guarded("probe", [] { throw std::runtime_error("bad sensor\nbacktrace line"); });
  CHECK(s.code() == StatusCode::internal);
  CHECK(s.message() == "probe: bad sensor");
  Result<int> r = guarded("value", [] { return 7; });
  REQUIRE(r.ok());
  CHECK(r.value() == 7);
  Result<int> thrown = guarded("value", []() -> int { throw 42; });
  CHECK_FALSE(thrown.ok());
  CHECK(thrown.status().message() == "value: unknown exception");
  Result<int> passed = guarded("status", []() -> Result<int> { return Status(StatusCode::unavailable, "no driver"); });
  CHECK(passed.status().code() == StatusCode::unavailable);
}

TEST_CASE("a Result built from an ok Status is an error, not an empty value") {
  Result<int> r{Status::ok()};
  CHECK_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::internal);
}

TEST_CASE("capabilities: typed keys round-trip and free keys count when truthy") {
  for (const auto& [cap, name] : kCapabilityNames) CHECK(capability_from_string(name) == cap);
  CHECK_FALSE(capability_from_string("bf17"));
  CapabilitySet set;
  set.add(Capability::bf16).add(Capability::bf16).set("avx512_bf16", "true").set("amx_bf16", "false");
  CHECK(set.typed.size() == 1);
  CHECK(set.has("bf16"));
  CHECK_FALSE(set.has("fp16"));
  CHECK(set.has("avx512_bf16"));
  CHECK_FALSE(set.has("amx_bf16"));
  CHECK_FALSE(set.has("missing"));
}

TEST_CASE("PCI scan finds NVIDIA and AMD display devices only") {
  SysfsRoot root(ACCELKIT_TEST_FIXTURES "/pci/two-gpus");
  auto gpus = scan_pci_gpus();
  REQUIRE(gpus.size() == 2);
  CHECK(gpus[0].address == "0000:01:00.0");
  CHECK(gpus[0].vendor == 0x10de);
  CHECK(gpus[0].pci_class == 0x030200);
  CHECK(gpus[1].vendor == 0x1002);
}

TEST_CASE("PCI scan of a machine without GPUs, or without sysfs, is empty") {
  {
    SysfsRoot root(ACCELKIT_TEST_FIXTURES "/pci/no-gpu");
    CHECK(scan_pci_gpus().empty());
  }
  SysfsRoot root(ACCELKIT_TEST_FIXTURES "/pci/does-not-exist");
  CHECK(scan_pci_gpus().empty());
}

TEST_CASE("GPUs on the bus with no usable plugin give install hints") {
  SysfsRoot root(ACCELKIT_TEST_FIXTURES "/pci/two-gpus");
  PluginRecord cpu;
  cpu.name = "cpu";
  cpu.status = PluginStatus::usable;
  ProbeReport report;
  report.score = 10;
  DeviceInfo dev;
  dev.id = "cpu:0";
  dev.torch_device = "cpu";
  dev.kind = DeviceKind::cpu;
  report.devices.push_back(dev);
  cpu.probe = report;
  PluginRecord rocm;
  rocm.name = "rocm";
  rocm.status = PluginStatus::unavailable;
  rocm.reason = "LibTorch here has no ROCm";
  Decision d = negotiate({cpu, rocm}, DeviceRequest{}, scan_pci_gpus());
  REQUIRE(d.ok);
  REQUIRE(d.hints.size() == 2);
  CHECK(d.hints[0].find("NVIDIA GPU on the PCI bus at 0000:01:00.0") != std::string::npos);
  CHECK(d.hints[0].find("install the accelkit-plugin-cuda package") != std::string::npos);
  CHECK(d.hints[1].find("the rocm plugin is unavailable: LibTorch here has no ROCm") != std::string::npos);
}

}  // namespace core_suite
