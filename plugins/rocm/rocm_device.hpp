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
  // `activation`: what opening did (environment, memory fraction), shown in the plan.
  // `unusable`: why LibTorch cannot train on it ("" when it can); such a device only monitors.
  RocmDevice(RocmGpu gpu, DeviceInfo info, std::vector<std::string> activation, std::string unusable);

  const DeviceInfo& info() const noexcept override { return info_; }
  Result<std::shared_ptr<Precision>> precision() noexcept override;
  Result<std::shared_ptr<Optimizer>> optimizer() noexcept override;
  Result<std::shared_ptr<Monitor>> monitor() noexcept override;

 private:
  RocmGpu gpu_;
  DeviceInfo info_;
  std::vector<std::string> activation_;
  std::string unusable_;
  std::mutex mutex_;
  std::shared_ptr<Precision> precision_;
  std::shared_ptr<Monitor> monitor_;
};

}  // namespace accelkit::rocm
