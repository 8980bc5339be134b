// In-process fake CUDA driver and NVML tables for the cuda suites: a list of GPUs the fake
// driver shows, and a separately ordered list of what the fake NVML knows (by bus id / UUID),
// so matching never works by index. Header-only; state is per test binary.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "cuda_probe.hpp"
#include "driver_api.hpp"
#include "nvml_api.hpp"

namespace accelkit::cuda::fake {

struct Gpu {
  std::string name;
  int cc_major, cc_minor, sms;
  bool integrated;
  int domain, bus, device;
  std::size_t memory;
  unsigned char uuid_seed;
  int compute_mode = kComputeModeDefault;
};

struct NvmlGpu {
  std::string bus_id;  // as NVML would accept it
  std::string uuid;
  unsigned int temperature = 40;
  NvmlReturn temperature_ret = kNvmlSuccess;
  unsigned int power_mw = 100000, power_limit_mw = 700000;
  NvmlReturn power_ret = kNvmlSuccess;
  unsigned int sm_clock = 1980, mem_clock = 2619;
  unsigned long long reasons = 0;
  NvmlReturn reasons_ret = kNvmlSuccess;
  unsigned int util_gpu = 50, util_mem = 20;
  NvmlReturn util_ret = kNvmlSuccess;
  unsigned long long mem_total = 80ull << 30, mem_used = 1ull << 30;
  unsigned int running = 0;
};

struct State {
  std::vector<Gpu> gpus;
  std::vector<NvmlGpu> nvml;
  int init_result = kCudaSuccess;
  int driver_version = 13000;
};

inline State& state() {
  static State s;
  return s;
}

inline CuUuid uuid_of(unsigned char seed) {
  CuUuid u{};
  for (int i = 0; i < 16; ++i) u.bytes[i] = static_cast<unsigned char>(seed + i);
  return u;
}

inline Gpu h100() { return {"NVIDIA H100 80GB HBM3", 9, 0, 132, false, 0, 0x01, 0, 85520809984ull, 0x10}; }
inline Gpu v100() { return {"Tesla V100-SXM2-16GB", 7, 0, 80, false, 0, 0x41, 0, 17071734784ull, 0x20}; }
inline Gpu p100() { return {"Tesla P100-PCIE-16GB", 6, 0, 56, false, 0, 0x81, 0, 17071734784ull, 0x30}; }
inline Gpu orin() { return {"Orin", 8, 7, 16, true, 0, 0x00, 0, 64ull << 30, 0x40}; }

// NVML's view of a fake GPU, matched by bus id and UUID.
inline NvmlGpu nvml_of(const Gpu& g) {
  NvmlGpu n;
  n.bus_id = format_pci_bus_id(g.domain, g.bus, g.device);
  n.uuid = format_gpu_uuid(uuid_of(g.uuid_seed));
  return n;
}

namespace driver {
inline CuResult init(unsigned) { return state().init_result; }
inline CuResult version(int* v) { *v = state().driver_version; return kCudaSuccess; }
inline CuResult count(int* n) { *n = static_cast<int>(state().gpus.size()); return kCudaSuccess; }
inline CuResult get(CuDevice* d, int i) { *d = i; return i < static_cast<int>(state().gpus.size()) ? kCudaSuccess : 101; }
inline CuResult name(char* out, int len, CuDevice d) {
  std::strncpy(out, state().gpus[d].name.c_str(), static_cast<std::size_t>(len) - 1);
  return kCudaSuccess;
}
inline CuResult attribute(int* v, int a, CuDevice d) {
  const Gpu& g = state().gpus[d];
  switch (a) {
    case kAttrMultiprocessorCount: *v = g.sms; return kCudaSuccess;
    case kAttrIntegrated: *v = g.integrated; return kCudaSuccess;
    case kAttrComputeMode: *v = g.compute_mode; return kCudaSuccess;
    case kAttrPciBusId: *v = g.bus; return kCudaSuccess;
    case kAttrPciDeviceId: *v = g.device; return kCudaSuccess;
    case kAttrPciDomainId: *v = g.domain; return kCudaSuccess;
    case kAttrComputeCapabilityMajor: *v = g.cc_major; return kCudaSuccess;
    case kAttrComputeCapabilityMinor: *v = g.cc_minor; return kCudaSuccess;
  }
  return 1;
}
inline CuResult total_mem(std::size_t* b, CuDevice d) { *b = state().gpus[d].memory; return kCudaSuccess; }
inline CuResult uuid(CuUuid* u, CuDevice d) { *u = uuid_of(state().gpus[d].uuid_seed); return kCudaSuccess; }
}  // namespace driver

inline DriverApi driver_api() {
  DriverApi d;
  d.init = driver::init;
  d.driver_get_version = driver::version;
  d.device_get_count = driver::count;
  d.device_get = driver::get;
  d.device_get_name = driver::name;
  d.device_get_attribute = driver::attribute;
  d.device_total_mem = driver::total_mem;
  d.device_get_uuid = driver::uuid;
  d.library = "fake libcuda";
  return d;
}

namespace nvml {
inline NvmlGpu& of(NvmlDevice d) { return *reinterpret_cast<NvmlGpu*>(d); }
inline NvmlDevice handle(NvmlGpu& g) { return reinterpret_cast<NvmlDevice>(&g); }
inline NvmlReturn init() { return kNvmlSuccess; }
inline const char* error_string(NvmlReturn r) { return r == kNvmlErrorNotSupported ? "Not Supported" : "Unknown Error"; }
inline NvmlReturn by_bus(const char* id, NvmlDevice* d) {
  for (auto& g : state().nvml)
    if (g.bus_id == id) { *d = handle(g); return kNvmlSuccess; }
  return kNvmlErrorNotFound;
}
inline NvmlReturn by_uuid(const char* id, NvmlDevice* d) {
  for (auto& g : state().nvml)
    if (g.uuid == id) { *d = handle(g); return kNvmlSuccess; }
  return kNvmlErrorNotFound;
}
inline NvmlReturn temperature(NvmlDevice d, int, unsigned int* c) { *c = of(d).temperature; return of(d).temperature_ret; }
inline NvmlReturn power(NvmlDevice d, unsigned int* mw) { *mw = of(d).power_mw; return of(d).power_ret; }
inline NvmlReturn power_limit(NvmlDevice d, unsigned int* mw) { *mw = of(d).power_limit_mw; return of(d).power_ret; }
inline NvmlReturn clock(NvmlDevice d, int type, unsigned int* mhz) {
  *mhz = type == kNvmlClockSm ? of(d).sm_clock : of(d).mem_clock;
  return kNvmlSuccess;
}
inline NvmlReturn reasons(NvmlDevice d, unsigned long long* r) { *r = of(d).reasons; return of(d).reasons_ret; }
inline NvmlReturn utilization(NvmlDevice d, NvmlUtilization* u) {
  u->gpu = of(d).util_gpu;
  u->memory = of(d).util_mem;
  return of(d).util_ret;
}
inline NvmlReturn memory(NvmlDevice d, NvmlMemory* m) {
  m->total = of(d).mem_total;
  m->used = of(d).mem_used;
  m->free = m->total - m->used;
  return kNvmlSuccess;
}
inline NvmlReturn running(NvmlDevice d, unsigned int* count, void*) {
  const unsigned int n = of(d).running;
  const bool fits = *count >= n;
  *count = n;
  return fits ? kNvmlSuccess : kNvmlErrorInsufficientSize;
}
}  // namespace nvml

inline NvmlApi nvml_api() {
  NvmlApi a;
  a.init = nvml::init;
  a.error_string = nvml::error_string;
  a.device_by_pci_bus_id = nvml::by_bus;
  a.device_by_uuid = nvml::by_uuid;
  a.temperature = nvml::temperature;
  a.power_usage = nvml::power;
  a.power_limit = nvml::power_limit;
  a.clock = nvml::clock;
  a.clock_event_reasons = nvml::reasons;
  a.utilization = nvml::utilization;
  a.memory = nvml::memory;
  a.running_compute_processes = nvml::running;
  a.library = "fake nvml";
  return a;
}

// Resets the fakes to `gpus`, with NVML knowing the same GPUs in reverse order.
inline void reset(std::vector<Gpu> gpus) {
  State& s = state();
  s = State{};
  s.gpus = std::move(gpus);
  for (auto it = s.gpus.rbegin(); it != s.gpus.rend(); ++it) s.nvml.push_back(nvml_of(*it));
}

}  // namespace accelkit::cuda::fake
