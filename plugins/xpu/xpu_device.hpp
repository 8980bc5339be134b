// accelkit::Device for one Intel GPU; LibTorch drives it as device type XPU when it has XPU.
#pragma once

#include <memory>
#include <string>

#include <accelkit/sdk/support/cached_device.hpp>

#include "xpu_probe.hpp"

namespace accelkit::xpu {

class XpuDevice final : public support::CachedDevice {
 public:
  // `torch_index`: its LibTorch XPU index, -1 when LibTorch cannot use it, and then `unusable`
  // says why (such a device only monitors and reports the device's memory).
  XpuDevice(XpuGpu gpu, DeviceInfo info, std::shared_ptr<const SysmanApi> sysman, int torch_index,
            std::string unusable);

  Result<std::shared_ptr<Optimizer>> optimizer() noexcept override;
  Result<MemoryStats> memory() noexcept override;
  Status reset_peak_memory() noexcept override;
  Status empty_cache() noexcept override;

 private:
  Result<std::shared_ptr<Precision>> make_precision() override;
  Result<std::shared_ptr<Monitor>> make_monitor() override;

  XpuGpu gpu_;
  std::shared_ptr<const SysmanApi> sysman_;
  int torch_index_;
  std::string unusable_;
};

}  // namespace accelkit::xpu
