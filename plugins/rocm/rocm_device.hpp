// accelkit::Device for one AMD GPU that LibTorch (a ROCm build) drives as device type CUDA.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <accelkit/sdk/support/cached_device.hpp>

#include "rocm_probe.hpp"

namespace accelkit::rocm {

class RocmDevice final : public support::CachedDevice {
 public:
  // `torch_index`: its LibTorch (CUDA-type) index, -1 when LibTorch cannot use it.
  // `activation`: what opening did (environment, memory fraction), shown in the plan.
  // `unusable`: why LibTorch cannot train on it ("" when it can); such a device only monitors
  // and reports the card's VRAM.
  RocmDevice(RocmGpu gpu, DeviceInfo info, int torch_index, std::vector<std::string> activation, std::string unusable);

  Result<std::shared_ptr<Optimizer>> optimizer() noexcept override;
  // device_memory.hpp: LibTorch's HIP caching allocator (on a GPU LibTorch drives, where the
  // plugin was built against c10_hip) and the card's VRAM from amdgpu sysfs. Without the
  // allocator, reset_peak_memory() and empty_cache() are not supported and say why.
  Result<MemoryStats> memory() noexcept override;
  Status reset_peak_memory() noexcept override;
  Status empty_cache() noexcept override;

 private:
  // Why it has none: LibTorch cannot use the GPU (precision), no amdgpu sysfs directory (monitor).
  Result<std::shared_ptr<Precision>> make_precision() override;
  Result<std::shared_ptr<Monitor>> make_monitor() override;

  RocmGpu gpu_;
  int torch_index_;
  std::vector<std::string> activation_;
  std::string unusable_;
};

}  // namespace accelkit::rocm
