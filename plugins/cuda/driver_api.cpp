#include "driver_api.hpp"

#include "dl_symbols.hpp"

namespace accelkit::cuda {

std::string driver_library_name() {
  return library_from_env("ACCELKIT_CUDA_DRIVER_LIB", "libcuda.so.1");
}

bool load_driver_api(const std::string& library, DriverApi* api, std::string* error) {
  DriverApi out;
  out.library = library;
  void* handle = open_library(library, error);
  if (!handle) return false;
  // The handle is never closed: the driver keeps threads and state for the process's life.
  SymbolResolver sym(handle, library);
  bool ok = sym.require("cuInit", out.init) && sym.require("cuDriverGetVersion", out.driver_get_version) &&
            sym.require("cuDeviceGetCount", out.device_get_count) && sym.require("cuDeviceGet", out.device_get) &&
            sym.require("cuDeviceGetName", out.device_get_name) &&
            sym.require("cuDeviceGetAttribute", out.device_get_attribute) &&
            sym.require("cuDeviceTotalMem_v2", out.device_total_mem);
  if (!ok) {
    *error = sym.error();
    return false;
  }
  if (!sym.optional("cuDeviceGetUuid_v2", out.device_get_uuid)) sym.optional("cuDeviceGetUuid", out.device_get_uuid);
  sym.optional("cuGetErrorString", out.get_error_string);
  *api = std::move(out);
  return true;
}

std::string driver_error_text(const DriverApi& api, CuResult result) {
  std::string out = "CUresult " + std::to_string(result);
  const char* text = nullptr;
  if (api.get_error_string && api.get_error_string(result, &text) == kCudaSuccess && text)
    out += " (" + std::string(text) + ")";
  return out;
}

}  // namespace accelkit::cuda
