#include "runtime_libs.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace accelkit::rocm {
namespace {

void* open_first(std::initializer_list<const char*> names, std::string& opened, std::string& error) {
  for (const char* name : names) {
    if (void* h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      opened = name;
      return h;
    }
    const char* e = ::dlerror();
    error = e ? e : "dlopen failed";
  }
  return nullptr;
}

template <class Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(handle, name));
}

}  // namespace

std::string hip_version_string(int version) {
  if (version <= 0) return "unknown";
  return std::to_string(version / 10000000) + "." + std::to_string((version / 100000) % 100) + "." +
         std::to_string(version % 100000);
}

HipRuntimeInfo load_hip_runtime(bool enumerate) {
  HipRuntimeInfo info;
  void* h = open_first({"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so.7"},
                       info.library, info.error);
  if (!h) return info;  // never dlclosed: HIP keeps threads and state
  info.loaded = true;
  info.error.clear();
  using IntOut = int (*)(int*);
  if (auto fn = symbol<IntOut>(h, "hipRuntimeGetVersion")) {
    int v = 0;
    if (fn(&v) == 0) info.runtime_version = v;
  }
  if (!enumerate) return info;
  if (auto count_fn = symbol<IntOut>(h, "hipGetDeviceCount")) {
    int n = 0;
    if (count_fn(&n) == 0) info.device_count = n;
  }
  using BusId = int (*)(char*, int, int);
  if (auto bus_fn = symbol<BusId>(h, "hipDeviceGetPCIBusId"); bus_fn && info.device_count) {
    for (int i = 0; i < *info.device_count; ++i) {
      char buf[64] = {};
      std::string id = bus_fn(buf, sizeof buf, i) == 0 ? buf : "";
      std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      info.pci_bus_ids.push_back(id);
    }
  }
  return info;
}

SmiInfo load_rocm_smi() {
  SmiInfo info;
  std::string error;
  void* h = open_first({"librocm_smi64.so", "librocm_smi64.so.7", "librocm_smi64.so.6", "librocm_smi64.so.5"},
                       info.library, error);
  if (!h) return info;
  info.loaded = true;
  struct RsmiVersion {  // rsmi_version_t
    std::uint32_t major, minor, patch;
    const char* build;
  };
  using VersionGet = int (*)(RsmiVersion*);
  if (auto fn = symbol<VersionGet>(h, "rsmi_version_get")) {
    RsmiVersion v{};
    if (fn(&v) == 0)
      info.version = std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
  }
  return info;
}

}  // namespace accelkit::rocm
