#include "cpu_device.hpp"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "cpu_monitor.hpp"
#include "cpu_optimizer.hpp"
#include "cpu_precision.hpp"
#include "process_memory.hpp"

namespace accelkit::cpu {

CpuDevice::CpuDevice(CpuProbe probe, DeviceInfo info)
    : CachedDevice("cpu", std::move(info)), probe_(std::move(probe)) {}

Result<std::shared_ptr<Precision>> CpuDevice::make_precision() {
  return std::shared_ptr<Precision>(std::make_shared<CpuPrecision>(probe_));
}

Result<std::shared_ptr<Optimizer>> CpuDevice::optimizer() noexcept {
  return guarded("cpu optimizer", [&]() -> std::shared_ptr<Optimizer> { return std::make_shared<CpuOptimizer>(); });
}

Result<std::shared_ptr<Monitor>> CpuDevice::make_monitor() {
  return std::shared_ptr<Monitor>(std::make_shared<CpuMonitor>());
}

Result<MemoryStats> CpuDevice::memory() noexcept {
  return guarded("cpu memory", [] { return read_process_memory(); });
}

Status CpuDevice::reset_peak_memory() noexcept {
  try {
    return reset_process_peak();
  } catch (const std::exception& e) {
    return Status(StatusCode::internal, std::string("cpu reset_peak_memory: ") + e.what());
  }
}

Status CpuDevice::empty_cache() noexcept {
#ifdef __GLIBC__
  malloc_trim(0);  // 1 where it gave memory back, 0 where there was none to give: both fine
  return Status::ok();
#else
  return Status(StatusCode::not_supported, "the process's malloc is not glibc's: no free memory to give back");
#endif
}

}  // namespace accelkit::cpu
