// The few CUDA driver API entry points the probe needs, as a table of function pointers.
// load_driver_api() fills it from libcuda.so.1 with dlopen (never linked, so the plugin loads
// where no driver is installed); tests fill it with fakes. Types and constants are declared
// here with the driver's values (cuda.h), so nothing from the toolkit is needed.
#pragma once

#include <cstddef>
#include <string>

namespace accelkit::cuda {

using CuResult = int;  // CUresult
using CuDevice = int;  // CUdevice

inline constexpr CuResult kCudaSuccess = 0;
inline constexpr CuResult kCudaErrorNotInitialized = 3;
inline constexpr CuResult kCudaErrorInsufficientDriver = 35;
inline constexpr CuResult kCudaErrorNoDevice = 100;
inline constexpr CuResult kCudaErrorSystemDriverMismatch = 803;

// CUdevice_attribute values used here.
enum DriverAttribute : int {
  kAttrMultiprocessorCount = 16,
  kAttrIntegrated = 18,
  kAttrComputeMode = 20,
  kAttrPciBusId = 33,
  kAttrPciDeviceId = 34,
  kAttrPciDomainId = 50,
  kAttrComputeCapabilityMajor = 75,
  kAttrComputeCapabilityMinor = 76,
};

// CUcomputemode.
inline constexpr int kComputeModeDefault = 0;
inline constexpr int kComputeModeProhibited = 2;
inline constexpr int kComputeModeExclusiveProcess = 3;

struct CuUuid {
  unsigned char bytes[16];
};

struct DriverApi {
  CuResult (*init)(unsigned flags) = nullptr;                                 // cuInit
  CuResult (*driver_get_version)(int* version) = nullptr;                     // cuDriverGetVersion
  CuResult (*device_get_count)(int* count) = nullptr;                         // cuDeviceGetCount
  CuResult (*device_get)(CuDevice* device, int ordinal) = nullptr;            // cuDeviceGet
  CuResult (*device_get_name)(char* name, int len, CuDevice dev) = nullptr;   // cuDeviceGetName
  CuResult (*device_get_attribute)(int* value, int attr, CuDevice dev) = nullptr;
  CuResult (*device_total_mem)(std::size_t* bytes, CuDevice dev) = nullptr;   // cuDeviceTotalMem_v2
  CuResult (*device_get_uuid)(CuUuid* uuid, CuDevice dev) = nullptr;          // optional
  CuResult (*get_error_string)(CuResult error, const char** text) = nullptr;  // optional
  std::string library;  // what was opened ("libcuda.so.1"), for reports
};

// "ACCELKIT_CUDA_DRIVER_LIB" when set (secure_getenv), else "libcuda.so.1".
std::string driver_library_name();

// Opens `library` (RTLD_NOW | RTLD_LOCAL; never closed) and resolves the table. false with
// *error set (dlerror text, or the missing symbol) when it cannot.
bool load_driver_api(const std::string& library, DriverApi* api, std::string* error);

// "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected", or "CUresult 100".
std::string driver_error_text(const DriverApi& api, CuResult result);

}  // namespace accelkit::cuda
