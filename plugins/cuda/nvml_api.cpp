#include "nvml_api.hpp"

#include <utility>

#include "dl_symbols.hpp"

namespace accelkit::cuda {

std::string nvml_library_name() {
  return library_from_env("ACCELKIT_NVML_LIB", "libnvidia-ml.so.1");
}

bool load_nvml_api(const std::string& library, NvmlApi* api, std::string* error) {
  NvmlApi out;
  out.library = library;
  void* handle = open_library(library, error);
  if (!handle) return false;
  SymbolResolver sym(handle, library);
  bool ok = sym.require("nvmlInit_v2", out.init) && sym.require("nvmlErrorString", out.error_string) &&
            sym.require("nvmlDeviceGetHandleByPciBusId_v2", out.device_by_pci_bus_id) &&
            sym.require("nvmlDeviceGetHandleByUUID", out.device_by_uuid) &&
            sym.require("nvmlDeviceGetTemperature", out.temperature) &&
            sym.require("nvmlDeviceGetPowerUsage", out.power_usage) &&
            sym.require("nvmlDeviceGetEnforcedPowerLimit", out.power_limit) &&
            sym.require("nvmlDeviceGetClockInfo", out.clock) &&
            sym.require("nvmlDeviceGetUtilizationRates", out.utilization) &&
            sym.require("nvmlDeviceGetMemoryInfo", out.memory);
  if (!ok) {
    *error = sym.error();
    return false;
  }
  sym.optional("nvmlSystemGetDriverVersion", out.system_get_driver_version);
  if (!sym.optional("nvmlDeviceGetCurrentClocksEventReasons", out.clock_event_reasons))
    sym.optional("nvmlDeviceGetCurrentClocksThrottleReasons", out.clock_event_reasons);
  sym.optional("nvmlDeviceGetComputeRunningProcesses_v3", out.running_compute_processes);
  sym.optional("nvmlDeviceGetTemperatureThreshold", out.temperature_threshold);
  // nvmlInit is reference counted and cheap to keep: the monitor needs it for the process's life.
  if (NvmlReturn r = out.init(); r != kNvmlSuccess) {
    *error = "nvmlInit_v2 failed: " + nvml_error_text(out, r);
    return false;
  }
  *api = std::move(out);
  return true;
}

std::string nvml_error_text(const NvmlApi& api, NvmlReturn r) {
  const char* text = api.error_string ? api.error_string(r) : nullptr;
  return (text ? std::string(text) + " " : std::string()) + "(" + std::to_string(r) + ")";
}

std::string clock_event_reason_names(unsigned long long mask) {
  static constexpr std::pair<unsigned long long, const char*> kNames[] = {
      {0x1ull, "gpu_idle"},
      {0x2ull, "applications_clocks_setting"},
      {0x4ull, "sw_power_cap"},
      {0x8ull, "hw_slowdown"},
      {0x10ull, "sync_boost"},
      {0x20ull, "sw_thermal_slowdown"},
      {0x40ull, "hw_thermal_slowdown"},
      {0x80ull, "hw_power_brake_slowdown"},
      {0x100ull, "display_clock_setting"},
  };
  if (mask == 0) return "none";
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if (!(mask & bit)) continue;
    if (!out.empty()) out += ',';
    out += name;
    mask &= ~bit;
  }
  if (mask) {
    if (!out.empty()) out += ',';
    out += "other";
  }
  return out;
}

}  // namespace accelkit::cuda
