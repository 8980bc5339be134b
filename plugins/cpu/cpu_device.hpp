// accelkit::Device for the CPU ("cpu:0"). Hands out one Precision and one Monitor.
#pragma once

#include <memory>
#include <mutex>

#include <accelkit/sdk/device.hpp>

#include "probe.hpp"

namespace accelkit::cpu {

class CpuDevice final : public Device {
 public:
  CpuDevice(CpuProbe probe, DeviceInfo info);

  const DeviceInfo& info() const noexcept override { return info_; }
  Result<std::shared_ptr<Precision>> precision() noexcept override;
  Result<std::shared_ptr<Optimizer>> optimizer() noexcept override;
  Result<std::shared_ptr<Monitor>> monitor() noexcept override;
  // The process's resident set and its peak, the machine's total and available memory.
  Result<MemoryStats> memory() noexcept override;
  Status reset_peak_memory() noexcept override;

 private:
  CpuProbe probe_;
  DeviceInfo info_;
  std::mutex mutex_;
  std::shared_ptr<Precision> precision_;
  std::shared_ptr<Monitor> monitor_;
};

}  // namespace accelkit::cpu
