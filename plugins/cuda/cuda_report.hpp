// Turns a CudaProbe and what LibTorch in this process can do into what the host shows: one
// DeviceInfo per GPU ("cuda:N"), a score (0 = unusable here) and reasons. Pure, so every
// case (no driver, old driver, LibTorch without CUDA, prohibited or busy devices) is tested.
#pragma once

#include <string>
#include <vector>

#include <accelkit/sdk/device.hpp>

#include "arch_rules.hpp"
#include "cuda_probe.hpp"

namespace accelkit::cuda {

inline constexpr int kCudaScore = 100;

// LibTorch's side, read by torch_cuda_status() (or set by tests).
struct TorchCudaStatus {
  int torch_major = 0, torch_minor = 0;
  bool has_cuda = false;     // LibTorch in this process was built with CUDA (its hooks are loaded)
  int runtime_version = 0;   // its CUDA runtime, 13000 = 13.0; 0 = unknown
  bool fused_adamw = false;  // this plugin's fused AdamW kernel is built in
  std::vector<int> kernel_archs;  // SASS architectures of that kernel, e.g. {80, 90}
  bool graph_capture = false;     // graph capture glue is built in
  bool fused_sgd = false;         // LibTorch's at::_fused_sgd_ has CUDA kernels (2.3+)
  bool nccl = false;              // NCCL process groups are built in (a LibTorch with NCCL)
};

struct CudaReport {
  int score = 0;
  std::vector<DeviceInfo> devices;
  std::vector<bool> usable;  // per device
  std::vector<std::string> reasons;
  std::vector<std::string> warnings;
};

CudaReport make_cuda_report(const CudaProbe& probe, const TorchCudaStatus& torch);

// "13.0" from 13000.
std::string cuda_version_text(int version);

}  // namespace accelkit::cuda
