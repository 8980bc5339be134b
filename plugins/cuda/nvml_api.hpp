// The NVML entry points the probe and monitor use, as a table of function pointers filled by
// load_nvml_api() from libnvidia-ml.so.1 (dlopen, never linked) or by tests with fakes.
// Types and constants carry NVML's values (nvml.h).
#pragma once

#include <string>

namespace accelkit::cuda {

using NvmlReturn = int;                   // nvmlReturn_t
using NvmlDevice = struct NvmlDeviceSt*;  // nvmlDevice_t (opaque)

inline constexpr NvmlReturn kNvmlSuccess = 0;
inline constexpr NvmlReturn kNvmlErrorNotSupported = 3;
inline constexpr NvmlReturn kNvmlErrorNoPermission = 4;
inline constexpr NvmlReturn kNvmlErrorNotFound = 6;
inline constexpr NvmlReturn kNvmlErrorInsufficientSize = 7;
inline constexpr NvmlReturn kNvmlErrorGpuIsLost = 15;

inline constexpr int kNvmlTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
inline constexpr int kNvmlClockSm = 1;         // NVML_CLOCK_SM
inline constexpr int kNvmlClockMem = 2;        // NVML_CLOCK_MEM

struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu, memory;
};

struct NvmlApi {
  NvmlReturn (*init)() = nullptr;                                          // nvmlInit_v2
  const char* (*error_string)(NvmlReturn) = nullptr;                       // nvmlErrorString
  NvmlReturn (*system_get_driver_version)(char*, unsigned int) = nullptr;  // optional
  NvmlReturn (*device_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;  // ..._v2
  NvmlReturn (*device_by_uuid)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int sensor, unsigned int* c) = nullptr;
  NvmlReturn (*power_usage)(NvmlDevice, unsigned int* mw) = nullptr;
  NvmlReturn (*power_limit)(NvmlDevice, unsigned int* mw) = nullptr;  // enforced limit
  NvmlReturn (*clock)(NvmlDevice, int type, unsigned int* mhz) = nullptr;
  // nvmlDeviceGetCurrentClocksEventReasons, or the older ...ThrottleReasons; optional.
  NvmlReturn (*clock_event_reasons)(NvmlDevice, unsigned long long* reasons) = nullptr;
  // nvmlDeviceGetTemperatureThreshold (type 1: slowdown); optional.
  NvmlReturn (*temperature_threshold)(NvmlDevice, int type, unsigned int* c) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  // nvmlDeviceGetComputeRunningProcesses_v3, called with a null array to count; optional.
  NvmlReturn (*running_compute_processes)(NvmlDevice, unsigned int* count, void* infos) = nullptr;
  std::string library;
};

// "ACCELKIT_NVML_LIB" when set (secure_getenv), else "libnvidia-ml.so.1".
std::string nvml_library_name();

// Opens `library` (never closed), resolves the table and calls nvmlInit_v2. false with
// *error set when any of that fails.
bool load_nvml_api(const std::string& library, NvmlApi* api, std::string* error);

// "Not Supported (3)", from nvmlErrorString when there is one.
std::string nvml_error_text(const NvmlApi& api, NvmlReturn r);

// NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: where the GPU starts to slow its clocks.
inline constexpr int kNvmlTemperatureThresholdSlowdown = 1;

// The reasons of a clocks-event mask that mean the GPU is slowing itself down to protect
// itself (power cap, thermal and hardware slowdowns, power brake), not idling or following a
// setting.
inline constexpr unsigned long long kNvmlThrottleMask = 0x4ull | 0x8ull | 0x20ull | 0x40ull | 0x80ull;

// Names of the set bits of an NVML clocks-event (throttle) reasons mask, comma-separated
// ("sw_power_cap,hw_thermal_slowdown"); "none" for 0.
std::string clock_event_reason_names(unsigned long long mask);

}  // namespace accelkit::cuda
