// accelkit::Device for one AMD GPU that LibTorch (a ROCm build) drives as device type CUDA.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <accelkit/sdk/device.hpp>

#include "rocm_probe.hpp"

namespace accelkit::rocm {

class RocmDevice final : public Device {
 public:
  // `torch_index`: its LibTorch (CUDA-type) index, -1 when LibTorch cannot use it.
  // `activation`: what opening did (environment, memory fraction), shown in the plan.
  // `unusable`: why LibTorch cannot train on it ("" when it can); such a device only monitors
  // and reports the card's VRAM.
  RocmDevice(RocmGpu gpu, DeviceInfo info, int torch_index, std::vector<std::string> activation, std::string unusable);

  const DeviceInfo& info() const noexcept override { return info_; }
  Result<std::shared_ptr<Precision>> precision() noexcept override;
  Result<std::shared_ptr<Optimizer>> optimizer() noexcept override;
  Result<std::shared_ptr<Monitor>> monitor() noexcept override;
  // device_memory.hpp: LibTorch's HIP caching allocator (on a GPU LibTorch drives, where the
  // plugin was built against c10_hip) and the card's VRAM from amdgpu sysfs. Without the
  // allocator, reset_peak_memory() and empty_cache() are not supported and say why.
  Result<MemoryStats> memory() noexcept override;
  Status reset_peak_memory() noexcept override;
  Status empty_cache() noexcept override;

 private:
  RocmGpu gpu_;
  DeviceInfo info_;
  int torch_index_;
  std::vector<std::string> activation_;
  std::string unusable_;
  std::mutex mutex_;
  std::shared_ptr<Precision> precision_;
  std::shared_ptr<Monitor> monitor_;
};

}  // namespace accelkit::rocm
