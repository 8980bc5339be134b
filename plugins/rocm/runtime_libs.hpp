// The ROCm user-space libraries, opened at run time (never linked) so the plugin loads on
// any machine: libamdhip64.so (HIP runtime) and librocm_smi64.so (ROCm SMI).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace accelkit::rocm {

struct HipRuntimeInfo {
  bool loaded = false;
  std::string library;           // the name that opened, "" when none did
  std::string error;             // dlerror() of the last attempt when none did
  std::optional<int> runtime_version;  // hipRuntimeGetVersion, e.g. 60241134
  std::optional<int> device_count;     // hipGetDeviceCount; only when asked to initialise
  std::vector<std::string> pci_bus_ids;  // hipDeviceGetPCIBusId per HIP device, lowercase
};

// Opens libamdhip64 (RTLD_LOCAL, never closed). With `enumerate` it also calls
// hipGetDeviceCount and hipDeviceGetPCIBusId, which initialise the HIP runtime: only done
// when LibTorch here drives AMD GPUs anyway.
HipRuntimeInfo load_hip_runtime(bool enumerate);

struct SmiInfo {
  bool loaded = false;
  std::string library;
  std::string version;  // "6.2.0" from rsmi_version_get, "" when unknown
};

// Opens librocm_smi64 and reads its version (no rsmi_init: sysfs gives the monitor its values).
SmiInfo load_rocm_smi();

// "6.2.41134" from hipRuntimeGetVersion's major * 10000000 + minor * 100000 + patch.
std::string hip_version_string(int version);

}  // namespace accelkit::rocm
