#include "xpu_torch.hpp"

#include <ATen/Context.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <accelkit/sdk/torch_compat.hpp>
#include <accelkit/sdk/torch_compat_accelerator.hpp>

namespace accelkit::xpu {
namespace {

// Why the allocator cannot be read here, or "".
std::string no_allocator_reason() {
  if (!compat::accelerator_memory_api())
    return "the XPU allocator's figures are read through LibTorch's device-generic memory API (2.13+; this is " +
           compat::libtorch_version() + ")";
  const auto type = compat::accelerator_type();
  if (!type || *type != c10::DeviceType::XPU) return "LibTorch's accelerator here is not XPU";
  return "";
}

}  // namespace

TorchXpu detect_torch_xpu() {
  TorchXpu t;
  if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::XPU)) {
    t.evidence = "no XPU device guard registered: LibTorch " + compat::libtorch_version() + " was built without XPU";
    return t;
  }
  t.has_xpu = true;
  t.device_count = static_cast<int>(c10::impl::getDeviceGuardImpl(c10::DeviceType::XPU)->deviceCount());
  t.evidence = "XPU device guard registered, " + std::to_string(t.device_count) + " device(s)";
  return t;
}

Result<AllocatorFigures> xpu_allocator_figures(int torch_index) {
  if (const std::string why = no_allocator_reason(); !why.empty()) return Status(StatusCode::not_supported, why);
  const compat::AcceleratorMemory m = compat::accelerator_memory(torch_index);
  return AllocatorFigures{m.allocated, m.peak, m.reserved};
}

Status xpu_reset_peak_stats(int torch_index) {
  if (const std::string why = no_allocator_reason(); !why.empty()) return Status(StatusCode::not_supported, why);
  compat::accelerator_reset_peak(torch_index);
  return Status::ok();
}

Status xpu_empty_cache() {
  if (const std::string why = no_allocator_reason(); !why.empty()) return Status(StatusCode::not_supported, why);
  compat::accelerator_empty_cache();
  return Status::ok();
}

Status apply_xpu_plan(const PrecisionPlan& plan) {
  if (!compat::accelerator_autocast(c10::DeviceType::XPU))
    return Status(StatusCode::not_supported,
                  "autocast for XPU needs LibTorch >= 2.4 (this is " + compat::libtorch_version() + ")");
  const bool on = plan.autocast && plan.dtype != Dtype::fp32;
  if (on) compat::set_autocast_dtype(c10::DeviceType::XPU, plan.dtype == Dtype::bf16 ? at::kBFloat16 : at::kHalf);
  compat::set_autocast_enabled(c10::DeviceType::XPU, on);
  // oneDNN on XPU runs fp32 matmuls with TF32 under the "high" matmul precision.
  at::globalContext().setFloat32MatmulPrecision(plan.tf32 ? "high" : "highest");
  return Status::ok();
}

std::vector<AppliedValue> read_back_xpu() {
  const bool high = at::globalContext().float32MatmulPrecision() != at::Float32MatmulPrecision::HIGHEST;
  return {
      {"autocast_xpu_enabled", compat::autocast_enabled(c10::DeviceType::XPU) ? "true" : "false", PlanField::autocast},
      {"autocast_xpu_dtype", c10::toString(compat::autocast_dtype(c10::DeviceType::XPU)), PlanField::autocast_dtype},
      {"float32_matmul_precision", high ? "high (tf32)" : "highest", PlanField::tf32},
  };
}

}  // namespace accelkit::xpu
