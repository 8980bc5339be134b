#include "rocm_device.hpp"

#include <accelkit/sdk/precision.hpp>

#include "precision_plan.hpp"
#include "rocm_monitor.hpp"
#include "rocm_torch.hpp"

namespace accelkit::rocm {
namespace {

class RocmPrecision final : public Precision {
 public:
  RocmPrecision(ArchRules rules, std::string device, std::vector<std::string> activation)
      : rules_(std::move(rules)), device_(std::move(device)), activation_(std::move(activation)) {}

  Result<PrecisionPlan> plan(const PrecisionRequest& request) noexcept override {
    return guarded("rocm precision plan", [&]() -> Result<PrecisionPlan> {
      auto p = plan_rocm_precision(request, rules_, device_);
      if (p.ok())
        for (const auto& line : activation_) p.value().reasons.push_back("on open: " + line);
      return p;
    });
  }
  Status apply(const PrecisionPlan& plan) noexcept override {
    return guarded("rocm precision apply", [&] { return apply_autocast(plan); });
  }
  Result<std::vector<AppliedValue>> read_back() noexcept override {
    return guarded("rocm precision read_back", [&] { return read_back_values(rules_); });
  }

 private:
  ArchRules rules_;
  std::string device_;
  std::vector<std::string> activation_;
};

}  // namespace

RocmDevice::RocmDevice(RocmGpu gpu, DeviceInfo info, int torch_index, std::vector<std::string> activation,
                       std::string unusable)
    : CachedDevice("rocm", std::move(info)),
      gpu_(std::move(gpu)),
      torch_index_(torch_index),
      activation_(std::move(activation)),
      unusable_(std::move(unusable)) {}

Result<std::shared_ptr<Precision>> RocmDevice::make_precision() {
  if (!unusable_.empty()) return Status(StatusCode::unavailable, info().id + ": " + unusable_);
  return std::shared_ptr<Precision>(
      std::make_shared<RocmPrecision>(gpu_.rules, info().id + " " + info().name, activation_));
}

Result<std::shared_ptr<Optimizer>> RocmDevice::optimizer() noexcept {
  return Status(StatusCode::not_supported, "the rocm plugin has no optimizer of its own; torch::optim::AdamW is used");
}

Result<std::shared_ptr<Monitor>> RocmDevice::make_monitor() {
  if (!gpu_.card)
    return Status(StatusCode::unavailable, info().id + " has no amdgpu sysfs directory to read sensors from");
  return std::shared_ptr<Monitor>(std::make_shared<RocmMonitor>(*gpu_.card));
}

Result<MemoryStats> RocmDevice::memory() noexcept {
  return guarded("rocm memory", [&]() -> Result<MemoryStats> {
    if (!unusable_.empty()) return rocm_memory(info().id, gpu_.card, std::nullopt, unusable_);
    const Result<AllocatorFigures> allocator = hip_allocator_figures(torch_index_);
    if (!allocator.ok()) return rocm_memory(info().id, gpu_.card, std::nullopt, allocator.status().message());
    return rocm_memory(info().id, gpu_.card, allocator.value(), "");
  });
}

Status RocmDevice::reset_peak_memory() noexcept {
  return guarded("rocm reset_peak_memory", [&]() -> Status {
    if (!unusable_.empty())
      return Status(StatusCode::not_supported, info().id + ": " + unusable_ + ": no allocator peak to reset");
    return hip_reset_peak_stats(torch_index_);
  });
}

Status RocmDevice::empty_cache() noexcept {
  return guarded("rocm empty_cache", [&]() -> Status {
    if (!unusable_.empty())
      return Status(StatusCode::not_supported, info().id + ": " + unusable_ + ": no allocator cache to empty");
    return hip_empty_cache();
  });
}

}  // namespace accelkit::rocm
