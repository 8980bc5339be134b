// The ROCm plugin's probe report: a pure function of what the probe found and what LibTorch
// here can do, so the score and every reason are testable against fixture trees.
#pragma once

#include <string>
#include <vector>

#include <accelkit/sdk/device.hpp>

#include "rocm_probe.hpp"
#include "torch_backend.hpp"

namespace accelkit::rocm {

inline constexpr const char* kNotRocmBuild = "LibTorch here is not a ROCm build";

// The fields of accelkit::ProbeReport (plugin.hpp needs LibTorch; this library does not).
struct RocmReport {
  int score = 0;
  std::vector<DeviceInfo> devices;
  std::vector<std::string> reasons;
  std::vector<std::string> warnings;
  // For each device: its LibTorch (CUDA-type) index, -1 when not usable.
  std::vector<int> torch_index;
};

RocmReport make_rocm_report(const RocmProbe& probe, const TorchBackend& torch);

// "AMD Instinct MI210", "AMD GPU [1002:731f]": the display name of one GPU.
std::string gpu_name(const RocmGpu& gpu);

}  // namespace accelkit::rocm
