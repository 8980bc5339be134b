// What the CUDA plugin learns from the driver and NVML, LibTorch-free: every device the driver
// shows (CUDA_VISIBLE_DEVICES already applied by it), each matched to its NVML handle by PCI
// bus id, else by UUID - never by index, since NVML lists every GPU in its own order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "driver_api.hpp"
#include "nvml_api.hpp"

namespace accelkit::cuda {

struct GpuFacts {
  int ordinal = 0;  // CUDA ordinal: LibTorch's cuda:N
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  bool integrated = false;
  std::uint64_t memory_bytes = 0;
  std::string pci_bus_id;  // "0000:01:00.0"; "" when the driver gave no PCI address
  std::string uuid;        // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"; "" when unknown
  int compute_mode = kComputeModeDefault;

  NvmlDevice nvml = nullptr;  // null: not matched
  std::string nvml_match;     // "pci bus id" | "uuid" | why not matched
  int running_processes = -1; // compute processes NVML sees on it; -1 = unknown
  // Which NVML readings answered at probe time (NOT_SUPPORTED etc. leave them false).
  bool has_temperature = false, has_power = false, has_utilisation = false, has_memory = false;
};

struct CudaProbe {
  std::string driver_library;
  std::string driver_error;  // non-empty: the driver library could not be loaded
  int driver_version = 0;    // cuDriverGetVersion: 13000 = CUDA 13.0; 0 = unknown
  CuResult init_result = kCudaSuccess;
  std::string init_error;    // non-empty: cuInit (or the device count) failed
  std::vector<GpuFacts> gpus;

  std::string nvml_library;
  std::string nvml_error;    // non-empty: NVML unavailable (telemetry n/a)
  std::string nvml_driver_version;  // "580.65.06"; "" when unknown
  std::optional<std::string> cuda_visible_devices;  // as set in the environment
};

// Probes with the given tables; null `driver` means it could not be loaded (driver_error
// says why), null `nvml` likewise with nvml_error.
CudaProbe probe_cuda(const DriverApi* driver, std::string driver_error, const NvmlApi* nvml,
                     std::string nvml_error);

// Loads libcuda and NVML (names from driver_library_name()/nvml_library_name()), once per
// process, and probes. The tables stay alive for the process (monitors use the NVML one).
CudaProbe probe_cuda();

// The process-wide NVML table probe_cuda() loaded, or null when NVML is unavailable.
const NvmlApi* process_nvml();

// 16 UUID bytes as NVML prints them: "GPU-" + 8-4-4-4-12 lowercase hex.
std::string format_gpu_uuid(const CuUuid& uuid);
// "0000:01:00.0" from PCI domain, bus and device.
std::string format_pci_bus_id(int domain, int bus, int device);

}  // namespace accelkit::cuda
