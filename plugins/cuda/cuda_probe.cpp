#include "cuda_probe.hpp"

#include <cstdio>
#include <cstdlib>

namespace accelkit::cuda {
namespace {

void match_nvml(const NvmlApi& nvml, GpuFacts& gpu) {
  NvmlDevice handle = nullptr;
  NvmlReturn by_bus = kNvmlErrorNotFound;
  if (!gpu.pci_bus_id.empty()) by_bus = nvml.device_by_pci_bus_id(gpu.pci_bus_id.c_str(), &handle);
  if (by_bus == kNvmlSuccess && handle) {
    gpu.nvml = handle;
    gpu.nvml_match = "pci bus id";
  } else if (!gpu.uuid.empty() && nvml.device_by_uuid(gpu.uuid.c_str(), &handle) == kNvmlSuccess && handle) {
    gpu.nvml = handle;
    gpu.nvml_match = "uuid";
  } else {
    gpu.nvml_match = "not matched: NVML knows neither bus id " + (gpu.pci_bus_id.empty() ? "?" : gpu.pci_bus_id) +
                     " nor uuid " + (gpu.uuid.empty() ? "?" : gpu.uuid);
    return;
  }
  unsigned int u = 0;
  gpu.has_temperature = nvml.temperature(handle, kNvmlTemperatureGpu, &u) == kNvmlSuccess;
  gpu.has_power = nvml.power_usage(handle, &u) == kNvmlSuccess;
  NvmlUtilization util{};
  gpu.has_utilisation = nvml.utilization(handle, &util) == kNvmlSuccess;
  NvmlMemory mem{};
  gpu.has_memory = nvml.memory(handle, &mem) == kNvmlSuccess;
  if (nvml.running_compute_processes) {
    unsigned int count = 0;
    NvmlReturn r = nvml.running_compute_processes(handle, &count, nullptr);
    if (r == kNvmlSuccess || r == kNvmlErrorInsufficientSize) gpu.running_processes = static_cast<int>(count);
  }
}

GpuFacts read_gpu(const DriverApi& d, int ordinal) {
  GpuFacts g;
  g.ordinal = ordinal;
  CuDevice dev = 0;
  if (d.device_get(&dev, ordinal) != kCudaSuccess) {
    g.name = "?";
    g.compute_mode = kComputeModeProhibited;
    return g;
  }
  char name[256] = {};
  if (d.device_get_name(name, sizeof name - 1, dev) == kCudaSuccess) g.name = name;
  auto attr = [&](int a, int fallback) {
    int v = 0;
    return d.device_get_attribute(&v, a, dev) == kCudaSuccess ? v : fallback;
  };
  g.cc_major = attr(kAttrComputeCapabilityMajor, 0);
  g.cc_minor = attr(kAttrComputeCapabilityMinor, 0);
  g.sm_count = attr(kAttrMultiprocessorCount, 0);
  g.integrated = attr(kAttrIntegrated, 0) != 0;
  g.compute_mode = attr(kAttrComputeMode, kComputeModeDefault);
  const int domain = attr(kAttrPciDomainId, -1), bus = attr(kAttrPciBusId, -1), device = attr(kAttrPciDeviceId, -1);
  if (domain >= 0 && bus >= 0 && device >= 0) g.pci_bus_id = format_pci_bus_id(domain, bus, device);
  std::size_t bytes = 0;
  if (d.device_total_mem(&bytes, dev) == kCudaSuccess) g.memory_bytes = bytes;
  CuUuid uuid{};
  if (d.device_get_uuid && d.device_get_uuid(&uuid, dev) == kCudaSuccess) g.uuid = format_gpu_uuid(uuid);
  return g;
}

}  // namespace

std::string format_gpu_uuid(const CuUuid& uuid) {
  std::string out = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    std::snprintf(hex, sizeof hex, "%02x", uuid.bytes[i]);
    out += hex;
  }
  return out;
}

std::string format_pci_bus_id(int domain, int bus, int device) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.0", static_cast<unsigned>(domain) & 0xffffu,
                static_cast<unsigned>(bus) & 0xffu, static_cast<unsigned>(device) & 0xffu);
  return buf;
}

CudaProbe probe_cuda(const DriverApi* driver, std::string driver_error, const NvmlApi* nvml,
                     std::string nvml_error) {
  CudaProbe p;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) p.cuda_visible_devices = v;
  p.nvml_error = std::move(nvml_error);
  if (nvml) {
    p.nvml_library = nvml->library;
    char version[96] = {};
    if (nvml->system_get_driver_version &&
        nvml->system_get_driver_version(version, sizeof version - 1) == kNvmlSuccess)
      p.nvml_driver_version = version;
  }
  if (!driver) {
    p.driver_error = driver_error.empty() ? "the driver library could not be loaded" : std::move(driver_error);
    return p;
  }
  p.driver_library = driver->library;
  int version = 0;
  if (driver->driver_get_version(&version) == kCudaSuccess) p.driver_version = version;
  p.init_result = driver->init(0);
  if (p.init_result != kCudaSuccess) {
    p.init_error = "cuInit failed: " + driver_error_text(*driver, p.init_result);
    return p;
  }
  int count = 0;
  if (CuResult r = driver->device_get_count(&count); r != kCudaSuccess) {
    p.init_result = r;
    p.init_error = "cuDeviceGetCount failed: " + driver_error_text(*driver, r);
    return p;
  }
  for (int i = 0; i < count; ++i) {
    GpuFacts g = read_gpu(*driver, i);
    if (nvml) match_nvml(*nvml, g);
    else g.nvml_match = "not matched: NVML unavailable";
    p.gpus.push_back(std::move(g));
  }
  return p;
}

namespace {

struct ProcessTables {
  DriverApi driver;
  NvmlApi nvml;
  bool driver_ok = false, nvml_ok = false;
  std::string driver_error, nvml_error;
};

ProcessTables& tables() {
  static ProcessTables t = [] {
    ProcessTables out;
    out.driver_ok = load_driver_api(driver_library_name(), &out.driver, &out.driver_error);
    out.nvml_ok = load_nvml_api(nvml_library_name(), &out.nvml, &out.nvml_error);
    return out;
  }();
  return t;
}

}  // namespace

CudaProbe probe_cuda() {
  ProcessTables& t = tables();
  CudaProbe p = probe_cuda(t.driver_ok ? &t.driver : nullptr, t.driver_error, t.nvml_ok ? &t.nvml : nullptr,
                           t.nvml_error);
  if (!t.driver_ok) p.driver_library = driver_library_name();
  if (!t.nvml_ok) p.nvml_library = nvml_library_name();
  return p;
}

const NvmlApi* process_nvml() {
  ProcessTables& t = tables();
  return t.nvml_ok ? &t.nvml : nullptr;
}

}  // namespace accelkit::cuda
