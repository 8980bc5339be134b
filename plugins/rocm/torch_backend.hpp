// Whether the LibTorch in this process drives AMD GPUs. LibTorch's ROCm builds expose them as
// device type CUDA; what tells a ROCm build apart is HIP: the HIP version macro at compile
// time (the module checks it) and LibTorch's HIP libraries (libc10_hip, libtorch_hip) in the
// process at run time (checked here, torch-free).
#pragma once

#include <string>

namespace accelkit::rocm {

struct TorchBackend {
  bool rocm_build = false;  // LibTorch here is a ROCm (HIP) build
  std::string evidence;     // "libtorch_hip.so loaded", "TORCH_HIP_VERSION 602", or why not
  int device_count = 0;     // torch::cuda::device_count() when rocm_build
  // The plugin reads LibTorch's HIP caching allocator (a ROCm build, and the plugin was built
  // against its c10_hip): Device::memory() has in_use, peak and reserved for a usable GPU.
  bool allocator_stats = false;
};

// The path of a loaded library whose file name starts with libc10_hip or libtorch_hip, or "".
std::string loaded_torch_hip_library();

}  // namespace accelkit::rocm
