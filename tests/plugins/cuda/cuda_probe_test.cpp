// The CUDA probe, report and monitor against fake driver and NVML tables (cuda_fakes.hpp):
// every device listed, NVML matched by bus id / UUID whatever its order, NOT_SUPPORTED as
// n/a, and each reason for a score of 0. Also the real dlopen path with a fixture libcuda.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "cuda_fakes.hpp"
#include "cuda_report.hpp"
#include "nvml_monitor.hpp"
#include "test_support.hpp"

using namespace accelkit;
using namespace accelkit::cuda;

namespace {

TorchCudaStatus torch_cuda(int runtime = 13000) {
  TorchCudaStatus t;
  t.torch_major = 2;
  t.torch_minor = 11;
  t.has_cuda = true;
  t.runtime_version = runtime;
  t.fused_adamw = true;
  t.kernel_archs = {80, 90};
  t.graph_capture = true;
  t.nccl = true;
  return t;
}

CudaProbe probe_fakes() {
  const DriverApi d = fake::driver_api();
  const NvmlApi n = fake::nvml_api();
  return probe_cuda(&d, "", &n, "");
}

bool any_contains(const std::vector<std::string>& lines, const std::string& needle) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(needle) != std::string::npos; });
}

std::string prop(const DeviceInfo& d, const std::string& key) {
  for (const auto& [k, v] : d.properties)
    if (k == key) return v;
  return "<none>";
}

const Reading& reading_of(const std::vector<Reading>& rs, const std::string& key) {
  auto it = std::find_if(rs.begin(), rs.end(), [&](const Reading& r) { return r.key == key; });
  REQUIRE(it != rs.end());
  return *it;
}

}  // namespace

TEST_CASE("four architectures: every device listed with its facts and capabilities") {
  fake::reset({fake::h100(), fake::v100(), fake::p100(), fake::orin()});
  const CudaProbe p = probe_fakes();
  REQUIRE(p.gpus.size() == 4);
  CHECK(p.gpus[0].name == "NVIDIA H100 80GB HBM3");
  CHECK(p.gpus[0].pci_bus_id == "0000:01:00.0");
  CHECK(p.gpus[1].pci_bus_id == "0000:41:00.0");
  CHECK(p.gpus[0].uuid == "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f");
  CHECK(p.gpus[3].integrated);

  const CudaReport r = make_cuda_report(p, torch_cuda());
  CHECK(r.score == kCudaScore);
  REQUIRE(r.devices.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(r.devices[i].id == "cuda:" + std::to_string(i));
    CHECK(r.devices[i].torch_device == r.devices[i].id);
    CHECK(r.usable[i]);
  }
  const auto& h100 = r.devices[0].capabilities;
  for (auto c : {Capability::bf16, Capability::tf32, Capability::fp8, Capability::fp16, Capability::sdpa_flash,
                 Capability::fused_adamw, Capability::graph_capture, Capability::memory_stats, Capability::thermal,
                 Capability::power, Capability::utilisation})
    CHECK_MESSAGE(h100.has(c), to_string(c));
  CHECK(h100.extra.at("compute_capability") == "9.0");
  CHECK(h100.extra.at(kCollectivesKey) == "nccl");

  // Built without NCCL (or a LibTorch without it): the device takes no part in a data-parallel run.
  TorchCudaStatus no_nccl = torch_cuda();
  no_nccl.nccl = false;
  CHECK(make_cuda_report(p, no_nccl).devices[0].capabilities.extra.count(kCollectivesKey) == 0);

  const auto& v100 = r.devices[1].capabilities;
  CHECK(v100.has(Capability::fp16));
  CHECK_FALSE(v100.has(Capability::bf16));
  CHECK_FALSE(v100.has(Capability::tf32));
  CHECK_FALSE(v100.has(Capability::sdpa_flash));
  CHECK(v100.has(Capability::sdpa_mem_efficient));
  CHECK_FALSE(v100.has(Capability::fused_adamw));  // no sm_70 SASS and below the sm_90 PTX

  const auto& p100 = r.devices[2].capabilities;
  CHECK_FALSE(p100.has("tensor_cores"));
  CHECK_FALSE(p100.has(Capability::fp8));

  CHECK(r.devices[3].kind == DeviceKind::integrated_gpu);
  CHECK(r.devices[0].kind == DeviceKind::discrete_gpu);
  CHECK(r.devices[3].capabilities.has(Capability::bf16));
  CHECK_FALSE(r.devices[3].capabilities.has(Capability::fp8));  // 8.7 < 8.9
  CHECK(r.devices[3].capabilities.has(Capability::fused_adamw));  // sm_80 SASS runs on 8.7
}

TEST_CASE("NVML is matched by bus id whatever its order, and an extra NVML GPU is ignored") {
  fake::reset({fake::h100(), fake::v100()});
  auto& nv = fake::state().nvml;  // reverse order: V100 first
  REQUIRE(nv[0].bus_id == "0000:41:00.0");
  nv[0].temperature = 61;  // V100
  nv[1].temperature = 35;  // H100
  fake::NvmlGpu hidden = fake::nvml_of(fake::p100());  // hidden by CUDA_VISIBLE_DEVICES, NVML still sees it
  hidden.temperature = 99;
  nv.insert(nv.begin(), hidden);

  const CudaProbe p = probe_fakes();
  REQUIRE(p.gpus.size() == 2);
  CHECK(p.gpus[0].nvml_match == "pci bus id");
  const NvmlApi api = fake::nvml_api();
  NvmlMonitor h100(&api, p.gpus[0].nvml, "");
  NvmlMonitor v100(&api, p.gpus[1].nvml, "");
  auto a = h100.sample();
  auto b = v100.sample();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(reading_of(a.value(), reading::temperature_c).value == 35.0);
  CHECK(reading_of(b.value(), reading::temperature_c).value == 61.0);
}

TEST_CASE("UUID matches when NVML does not know the bus id") {
  fake::reset({fake::h100()});
  fake::state().nvml[0].bus_id = "00000000:99:00.0";
  const CudaProbe p = probe_fakes();
  REQUIRE(p.gpus.size() == 1);
  CHECK(p.gpus[0].nvml != nullptr);
  CHECK(p.gpus[0].nvml_match == "uuid");

  fake::state().nvml[0].uuid = "GPU-other";
  const CudaProbe q = probe_fakes();
  CHECK(q.gpus[0].nvml == nullptr);
  CHECK(q.gpus[0].nvml_match.find("not matched") == 0);
  const CudaReport r = make_cuda_report(q, torch_cuda());
  CHECK_FALSE(r.devices[0].capabilities.has(Capability::thermal));
  NvmlMonitor m(nullptr, nullptr, "");
  auto s = m.sample();
  REQUIRE(s.ok());
  for (const auto& reading : s.value()) {
    CHECK_FALSE(reading.value.has_value());
    CHECK(reading.note.rfind("n/a", 0) == 0);
  }
}

TEST_CASE("NOT_SUPPORTED readings are n/a with the reason; the rest are read") {
  fake::reset({fake::h100()});
  auto& g = fake::state().nvml[0];
  g.power_ret = kNvmlErrorNotSupported;
  g.reasons = 0x4 | 0x40;
  g.mem_used = 3ull << 30;
  const CudaProbe p = probe_fakes();
  CHECK_FALSE(p.gpus[0].has_power);
  const CudaReport r = make_cuda_report(p, torch_cuda());
  CHECK_FALSE(r.devices[0].capabilities.has(Capability::power));
  CHECK(r.devices[0].capabilities.has(Capability::thermal));

  const NvmlApi api = fake::nvml_api();
  NvmlMonitor m(&api, p.gpus[0].nvml, "");
  auto s = m.sample();
  REQUIRE(s.ok());
  const auto readings = s.value();
  const auto power = reading_of(readings, reading::power_w);  // copies: no reference into a temporary key
  CHECK_FALSE(power.value.has_value());
  CHECK(power.note.find("not supported") != std::string::npos);
  CHECK_FALSE(reading_of(s.value(), reading::power_limit_w).value.has_value());
  CHECK(reading_of(s.value(), reading::temperature_c).value == 40.0);
  CHECK(reading_of(s.value(), reading::clock_mhz).value == 1980.0);
  CHECK(reading_of(s.value(), reading::memory_clock_mhz).value == 2619.0);
  CHECK(reading_of(s.value(), reading::utilisation_pct).value == 50.0);
  CHECK(reading_of(s.value(), reading::memory_used_bytes).value == static_cast<double>(3ull << 30));
  CHECK(reading_of(s.value(), reading::memory_total_bytes).value == static_cast<double>(80ull << 30));
  const auto reasons = reading_of(readings, reading_key::clock_event_reasons);
  CHECK(reasons.value == 68.0);
  CHECK(reasons.note == "sw_power_cap,hw_thermal_slowdown");
}

TEST_CASE("no driver: score 0 with the loader's reason, nothing listed") {
  const CudaReport r = make_cuda_report(probe_cuda(nullptr, "libcuda.so.1: cannot open shared object file", nullptr,
                                                   "libnvidia-ml.so.1: cannot open"),
                                        torch_cuda());
  CHECK(r.score == 0);
  CHECK(r.devices.empty());
  REQUIRE_FALSE(r.reasons.empty());
  CHECK(r.reasons[0].find("no NVIDIA driver: libcuda.so.1") == 0);
}

TEST_CASE("cuInit fails: no device, with CUDA_VISIBLE_DEVICES reported") {
  test::ScopedEnv visible("CUDA_VISIBLE_DEVICES", std::string(""));
  fake::reset({fake::h100()});
  fake::state().init_result = kCudaErrorNoDevice;
  const CudaProbe p = probe_fakes();
  REQUIRE(p.cuda_visible_devices.has_value());
  const CudaReport r = make_cuda_report(p, torch_cuda());
  CHECK(r.score == 0);
  CHECK(r.devices.empty());
  REQUIRE_FALSE(r.reasons.empty());
  CHECK(r.reasons[0].find("no CUDA device (CUDA_VISIBLE_DEVICES='')") == 0);
  CHECK(r.reasons[0].find("CUresult 100") != std::string::npos);
}

TEST_CASE("driver older than LibTorch's CUDA runtime: listed, score 0, says to update") {
  fake::reset({fake::h100()});
  fake::state().driver_version = 12040;
  const CudaReport r = make_cuda_report(probe_fakes(), torch_cuda(13000));
  CHECK(r.score == 0);
  REQUIRE(r.devices.size() == 1);
  CHECK(r.devices[0].torch_device.empty());
  CHECK_FALSE(r.usable[0]);
  CHECK(any_contains(r.reasons, "driver too old: it supports CUDA 12.4, LibTorch's runtime is CUDA 13.0"));

  // Same major, older minor: usable, with a warning.
  fake::state().driver_version = 13000;
  const CudaReport minor = make_cuda_report(probe_fakes(), torch_cuda(13010));
  CHECK(minor.score == kCudaScore);
  CHECK(any_contains(minor.warnings, "minor-version compatibility"));
}

TEST_CASE("LibTorch without CUDA: devices listed, not usable, score 0 with that reason") {
  fake::reset({fake::h100(), fake::v100()});
  TorchCudaStatus cpu_only;
  cpu_only.torch_major = 1;
  cpu_only.torch_minor = 13;
  const CudaReport r = make_cuda_report(probe_fakes(), cpu_only);
  CHECK(r.score == 0);
  REQUIRE(r.devices.size() == 2);
  for (const auto& d : r.devices) {
    CHECK(d.torch_device.empty());
    CHECK_FALSE(d.capabilities.has(Capability::fused_adamw));
    CHECK_FALSE(d.capabilities.has(Capability::sdpa_flash));  // LibTorch 1.13
    CHECK(d.capabilities.has(Capability::thermal));           // NVML still reads it
  }
  CHECK(r.reasons[0].find("LibTorch 1.13 in this process was built without CUDA") == 0);
}

TEST_CASE("prohibited and busy devices are listed but unusable") {
  auto prohibited = fake::h100();
  prohibited.compute_mode = kComputeModeProhibited;
  auto busy = fake::v100();
  busy.compute_mode = kComputeModeExclusiveProcess;
  auto free_exclusive = fake::p100();
  free_exclusive.compute_mode = kComputeModeExclusiveProcess;
  fake::reset({prohibited, busy, free_exclusive});
  for (auto& n : fake::state().nvml)
    if (n.bus_id == "0000:41:00.0") n.running = 2;

  const CudaReport r = make_cuda_report(probe_fakes(), torch_cuda());
  REQUIRE(r.devices.size() == 3);
  CHECK(r.score == kCudaScore);
  CHECK(r.usable == std::vector<bool>{false, false, true});
  CHECK(prop(r.devices[0], "compute mode") == "prohibited");
  CHECK(any_contains(r.warnings, "cuda:0 unusable: compute mode is prohibited"));
  CHECK(any_contains(r.warnings, "cuda:1 unusable: busy: exclusive-process compute mode and 2 process(es)"));
  CHECK(r.reasons[0].find("1 of 3 CUDA device(s) usable") == 0);

  fake::reset({prohibited});
  const CudaReport none = make_cuda_report(probe_fakes(), torch_cuda());
  CHECK(none.score == 0);
  CHECK(none.reasons[0] == "every CUDA device is prohibited or busy");
}

TEST_CASE("formatting: UUID, PCI bus id, CUDA version, clock event reasons") {
  CHECK(format_pci_bus_id(1, 0xa3, 2) == "0001:a3:02.0");
  CHECK(format_gpu_uuid(fake::uuid_of(0xf0)) == "GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff");
  CHECK(cuda_version_text(13000) == "13.0");
  CHECK(cuda_version_text(12040) == "12.4");
  CHECK(cuda_version_text(0) == "unknown");
  CHECK(clock_event_reason_names(0) == "none");
  CHECK(clock_event_reason_names(0x1) == "gpu_idle");
  CHECK(clock_event_reason_names(0x8 | 0x10000) == "hw_slowdown,other");
}

TEST_CASE("dlopen: a missing driver library and a library without the driver API are reported") {
  DriverApi api;
  std::string error;
  CHECK_FALSE(load_driver_api("/nonexistent/libcuda.so.1", &api, &error));
  CHECK(error.find("/nonexistent/libcuda.so.1") != std::string::npos);
  error.clear();
  CHECK_FALSE(load_driver_api("libc.so.6", &api, &error));
  CHECK(error == "libc.so.6 lacks cuInit");

  NvmlApi nvml;
  error.clear();
  CHECK_FALSE(load_nvml_api("/nonexistent/libnvidia-ml.so.1", &nvml, &error));
  CHECK_FALSE(error.empty());
}

TEST_CASE("dlopen: the fixture libcuda is loaded and probed through the real path") {
  DriverApi api;
  std::string error;
  REQUIRE_MESSAGE(load_driver_api(ACCELKIT_FAKE_LIBCUDA, &api, &error), error);
  CHECK((api.device_get_uuid != nullptr));
  CHECK((api.get_error_string != nullptr));
  const CudaProbe p = probe_cuda(&api, "", nullptr, "no NVML here");
  REQUIRE(p.gpus.size() == 2);
  CHECK(p.driver_version == 13000);
  CHECK(p.gpus[0].name == "NVIDIA H100 80GB HBM3");
  CHECK(p.gpus[0].cc_major == 9);
  CHECK(p.gpus[0].sm_count == 132);
  CHECK(p.gpus[1].pci_bus_id == "0000:41:00.0");
  CHECK(p.gpus[1].uuid == "GPU-22232425-2627-2829-2a2b-2c2d2e2f3031");
  CHECK(p.gpus[0].nvml_match == "not matched: NVML unavailable");
  const CudaReport r = make_cuda_report(p, torch_cuda());
  CHECK(r.score == kCudaScore);
  CHECK(any_contains(r.warnings, "NVML unavailable, telemetry is n/a: no NVML here"));

  test::ScopedEnv init("FAKE_CUDA_INIT", std::string("100"));
  const CudaProbe failed = probe_cuda(&api, "", nullptr, "");
  CHECK(failed.init_result == kCudaErrorNoDevice);
  CHECK(failed.init_error == "cuInit failed: CUresult 100 (no CUDA-capable device is detected)");
}

TEST_CASE("library names come from the environment") {
  {
    test::ScopedEnv env("ACCELKIT_CUDA_DRIVER_LIB", std::string("/opt/fake/libcuda.so.1"));
    CHECK(driver_library_name() == "/opt/fake/libcuda.so.1");
  }
  {
    test::ScopedEnv env("ACCELKIT_CUDA_DRIVER_LIB", std::nullopt);
    CHECK(driver_library_name() == "libcuda.so.1");
  }
  test::ScopedEnv env("ACCELKIT_NVML_LIB", std::nullopt);
  CHECK(nvml_library_name() == "libnvidia-ml.so.1");
}
