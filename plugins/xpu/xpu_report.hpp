// The xpu plugin's probe report: a pure function of what the probe found and what LibTorch
// here can do, so the score and every reason are testable against fixture trees and a fake
// Level Zero.
#pragma once

#include <string>
#include <vector>

#include <accelkit/sdk/device.hpp>

#include "xpu_probe.hpp"

namespace accelkit::xpu {

inline constexpr const char* kNoXpu = "LibTorch here has no XPU";
inline constexpr const char* kXpuHint =
    "to train on an Intel GPU, use a LibTorch built with XPU (PyTorch's XPU wheels: pip install torch "
    "--index-url https://download.pytorch.org/whl/xpu; or a source build with USE_XPU=1) and rebuild accelkit "
    "against it";

// Whether the LibTorch in this process drives Intel GPUs (device type XPU).
struct TorchXpu {
  bool has_xpu = false;
  std::string evidence;  // "XPU device guard registered (2 devices)", or why not
  int device_count = 0;
};

// The fields of accelkit::ProbeReport (plugin.hpp needs LibTorch; this library does not).
struct XpuReport {
  int score = 0;
  std::vector<DeviceInfo> devices;
  std::vector<std::string> reasons;
  std::vector<std::string> warnings;
  std::vector<int> torch_index;  // per device: its LibTorch XPU index, -1 when not usable
  std::vector<std::string> unusable;  // per device: why LibTorch cannot train on it ("" when it can)
};

XpuReport make_xpu_report(const XpuProbe& probe, const TorchXpu& torch);

// "Intel(R) Arc(TM) A770 Graphics", "Intel GPU [8086:56a0]".
std::string gpu_name(const XpuGpu& gpu);

}  // namespace accelkit::xpu
