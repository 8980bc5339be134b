#include "cpu_device.hpp"

#include "cpu_monitor.hpp"
#include "cpu_optimizer.hpp"
#include "cpu_precision.hpp"
#include "process_memory.hpp"

namespace accelkit::cpu {

CpuDevice::CpuDevice(CpuProbe probe, DeviceInfo info)
    : probe_(std::move(probe)), info_(std::move(info)) {}

Result<std::shared_ptr<Precision>> CpuDevice::precision() noexcept {
  return guarded("cpu precision", [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!precision_) precision_ = std::make_shared<CpuPrecision>(probe_);
    return precision_;
  });
}

Result<std::shared_ptr<Optimizer>> CpuDevice::optimizer() noexcept {
  return guarded("cpu optimizer", [&]() -> std::shared_ptr<Optimizer> { return std::make_shared<CpuOptimizer>(); });
}

Result<std::shared_ptr<Monitor>> CpuDevice::monitor() noexcept {
  return guarded("cpu monitor", [&]() -> std::shared_ptr<Monitor> {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!monitor_) monitor_ = std::make_shared<CpuMonitor>();
    return monitor_;
  });
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

}  // namespace accelkit::cpu
