// accelkit::Device for the CPU ("cpu:0"). Hands out one Precision and one Monitor.
#pragma once

#include <memory>

#include <accelkit/sdk/support/cached_device.hpp>

#include "probe.hpp"

namespace accelkit::cpu {

class CpuDevice final : public support::CachedDevice {
 public:
  CpuDevice(CpuProbe probe, DeviceInfo info);

  Result<std::shared_ptr<Optimizer>> optimizer() noexcept override;
  // The process's resident set and its peak, the machine's total and available memory.
  Result<MemoryStats> memory() noexcept override;
  Status reset_peak_memory() noexcept override;
  // glibc's malloc gives the free memory it keeps back to the system (malloc_trim): what
  // malloc_reuse keeps between steps, and any free memory inside its heaps.
  Status empty_cache() noexcept override;

 private:
  Result<std::shared_ptr<Precision>> make_precision() override;
  Result<std::shared_ptr<Monitor>> make_monitor() override;

  CpuProbe probe_;
};

}  // namespace accelkit::cpu
