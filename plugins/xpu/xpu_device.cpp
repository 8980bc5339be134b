#include "xpu_device.hpp"

#include <accelkit/sdk/precision.hpp>

#include "precision_plan.hpp"
#include "xpu_monitor.hpp"
#include "xpu_torch.hpp"

namespace accelkit::xpu {
namespace {

class XpuPrecision final : public Precision {
 public:
  XpuPrecision(XpuRules rules, std::string device) : rules_(std::move(rules)), device_(std::move(device)) {}

  Result<PrecisionPlan> plan(const PrecisionRequest& request) noexcept override {
    return guarded("xpu precision plan", [&] { return plan_xpu_precision(request, rules_, device_); });
  }
  Status apply(const PrecisionPlan& plan) noexcept override {
    return guarded("xpu precision apply", [&] { return apply_xpu_plan(plan); });
  }
  Result<std::vector<AppliedValue>> read_back() noexcept override {
    return guarded("xpu precision read_back", [&] { return read_back_xpu(); });
  }

 private:
  XpuRules rules_;
  std::string device_;
};

}  // namespace

XpuDevice::XpuDevice(XpuGpu gpu, DeviceInfo info, std::shared_ptr<const SysmanApi> sysman, int torch_index,
                     std::string unusable)
    : CachedDevice("xpu", std::move(info)),
      gpu_(std::move(gpu)),
      sysman_(std::move(sysman)),
      torch_index_(torch_index),
      unusable_(std::move(unusable)) {}

Result<std::shared_ptr<Precision>> XpuDevice::make_precision() {
  if (!unusable_.empty()) return Status(StatusCode::unavailable, info().id + ": " + unusable_);
  return std::shared_ptr<Precision>(std::make_shared<XpuPrecision>(gpu_.rules, info().id + " " + info().name));
}

Result<std::shared_ptr<Monitor>> XpuDevice::make_monitor() {
  if (!gpu_.card && !(sysman_ && gpu_.ze))
    return Status(StatusCode::unavailable, info().id + " has neither an i915/xe sysfs directory nor Level Zero Sysman "
                                                       "to read sensors from");
  return std::shared_ptr<Monitor>(std::make_shared<XpuMonitor>(gpu_, sysman_));
}

Result<std::shared_ptr<Optimizer>> XpuDevice::optimizer() noexcept {
  return Status(StatusCode::not_supported, "the xpu plugin has no optimizer of its own; torch::optim is used");
}

Result<MemoryStats> XpuDevice::memory() noexcept {
  return guarded("xpu memory", [&]() -> Result<MemoryStats> {
    std::optional<SysmanReading> zes;
    if (sysman_ && gpu_.ze) zes = read_sysman(*sysman_, gpu_.ze->handle);
    if (!unusable_.empty()) return xpu_memory(info().id, gpu_, zes, std::nullopt, unusable_);
    const Result<AllocatorFigures> allocator = xpu_allocator_figures(torch_index_);
    if (!allocator.ok()) return xpu_memory(info().id, gpu_, zes, std::nullopt, allocator.status().message());
    return xpu_memory(info().id, gpu_, zes, allocator.value(), "");
  });
}

Status XpuDevice::reset_peak_memory() noexcept {
  return guarded("xpu reset_peak_memory", [&]() -> Status {
    if (!unusable_.empty())
      return Status(StatusCode::not_supported, info().id + ": " + unusable_ + ": no allocator peak to reset");
    return xpu_reset_peak_stats(torch_index_);
  });
}

Status XpuDevice::empty_cache() noexcept {
  return guarded("xpu empty_cache", [&]() -> Status {
    if (!unusable_.empty())
      return Status(StatusCode::not_supported, info().id + ": " + unusable_ + ": no allocator cache to empty");
    return xpu_empty_cache();
  });
}

}  // namespace accelkit::xpu
