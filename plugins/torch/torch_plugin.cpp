// torch: the device-generic backend. Whatever accelerator this process's LibTorch reports
// through its device-generic API (at::accelerator: CUDA, XPU, HIP, MPS, MTIA, or a PrivateUse1
// backend a vendor extension registered) is offered as a device, with what that API gives:
// device count and index, synchronisation, memory figures and the device's dtypes where this
// LibTorch has them (torch_compat_accelerator.hpp), device-generic autocast for the precision
// plan, and LibTorch's at::_fused_adamw_ where it has a kernel for the device. A vendor plugin
// serving the same device type outranks it: its devices are of kind "other" with a low score,
// and `accelkit info` shows both. On LibTorch older than 2.6 it offers nothing and says why.
//
// What a device served only by this backend lacks: vendor sensors (no monitor) and vendor
// tuning (no TF32 rules, no plugin kernels). Graph capture goes through at::accelerator::Graph
// where LibTorch (2.12+) has an implementation registered for the type (generic_step.hpp).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "accelkit/sdk/device.hpp"
#include "accelkit/sdk/optimizer.hpp"
#include "accelkit/sdk/plugin.hpp"
#include "accelkit/sdk/precision.hpp"
#include "accelkit/sdk/support/adamw_state.hpp"
#include "accelkit/sdk/support/aten_fused_adamw.hpp"
#include "accelkit/sdk/support/host_file.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "accelkit/sdk/torch_compat_accelerator.hpp"
#include "generic_step.hpp"

namespace accelkit::torch_generic {
namespace {

constexpr int kScore = 5;  // below every vendor plugin's devices of the same type

std::string type_name(c10::DeviceType t) { return c10::DeviceTypeName(t, /*lower_case=*/true); }

// Whether the device computes bf16: LibTorch's own answer where it has one, else autocast's
// availability for the type.
bool computes_bf16(c10::DeviceType type, int index, std::string& source) {
  if (!compat::accelerator_autocast(type)) {
    source = "LibTorch " + compat::libtorch_version() + " has no autocast for " + type_name(type);
    return false;
  }
  try {
    if (auto dtypes = compat::accelerator_dtypes(index)) {
      source = "at::accelerator::getDeviceCapability";
      return std::find(dtypes->begin(), dtypes->end(), at::kBFloat16) != dtypes->end();
    }
  } catch (const c10::Error& e) {
    source = "getDeviceCapability failed (" + host::first_line(e.what_without_backtrace()) + "); autocast's availability";
    return true;
  }
  source = "autocast's availability (getDeviceCapability is used from LibTorch 2.13)";
  return true;
}

// Why steps on `type` cannot be captured through at::accelerator::Graph, or "".
std::string graph_refusal(c10::DeviceType type) {
  if (!compat::accelerator_graph_registered(type))
    return compat::accelerator_graph_api()
               ? "no graph implementation is registered for " + type_name(type) + " (at::accelerator::Graph)"
               : "device-generic graph capture needs LibTorch >= 2.12 (this is " + compat::libtorch_version() + ")";
  return "";
}

// The device as the probe reports it (opened = false: nothing that would start the device's
// runtime, such as a GPU context for its memory figures) or as the opened device does.
DeviceInfo device_info(c10::DeviceType type, int index, bool opened) {
  DeviceInfo d;
  d.id = "torch:" + std::to_string(index);
  d.torch_device = c10::Device(type, static_cast<c10::DeviceIndex>(index)).str();
  d.name = type_name(type) + " device " + std::to_string(index) + " (LibTorch's device-generic API)";
  d.vendor = "LibTorch";
  d.kind = DeviceKind::other;
  d.capabilities.add(Capability::fp32);
  std::string bf16_source;
  if (computes_bf16(type, index, bf16_source)) d.capabilities.add(Capability::bf16);
  if (compat::aten_fused_adamw_registered(type)) d.capabilities.add(Capability::fused_adamw);
  const std::string no_graph = graph_refusal(type);
  if (no_graph.empty()) d.capabilities.add(Capability::graph_capture);
  std::string memory = "read when the device is opened";
  if (opened) {
    try {
      const auto m = compat::accelerator_memory(index);
      d.memory_bytes = m.total;
      d.capabilities.add(Capability::memory_stats);
      memory = std::to_string(m.total >> 20) + " MiB (at::accelerator::getMemoryInfo)";
    } catch (const c10::Error& e) {
      memory = "not reported: " + host::first_line(e.what_without_backtrace());
    }
  }
  d.properties = {{"served by", "the torch plugin: LibTorch's device-generic API (at::accelerator)"},
                  {"device type", type_name(type)},
                  {"bf16", d.capabilities.has(Capability::bf16) ? "yes, from " + bf16_source : "no: " + bf16_source},
                  {"memory", memory},
                  {"fused adamw", compat::aten_fused_adamw_registered(type)
                                      ? "at::_fused_adamw_"
                                      : "none: LibTorch has no at::_fused_adamw_ kernel for " + type_name(type)},
                  {"graph capture", no_graph.empty() ? "at::accelerator::Graph (SGD steps)" : "none: " + no_graph},
                  {"lacks", "vendor sensors (no monitor), vendor precision rules and kernels"}};
  return d;
}

class GenericPrecision final : public Precision {
 public:
  GenericPrecision(c10::DeviceType type, bool bf16) : type_(type), bf16_(bf16) {}
  Result<PrecisionPlan> plan(const PrecisionRequest& request) noexcept override {
    return guarded("torch plan", [&]() -> Result<PrecisionPlan> {
      const Dtype asked = request.precision.value_or(Dtype::fp32);
      if (asked == Dtype::fp16 || (asked == Dtype::bf16 && !bf16_))
        return Status(StatusCode::not_supported, "the torch plugin runs " + type_name(type_) + " in fp32" +
                                                     (bf16_ ? " or bf16 autocast" : "") + " (asked " + to_string(asked) +
                                                     ")");
      if (request.tf32 == Toggle::on)
        return Status(StatusCode::not_supported, "the torch plugin has no TF32 rules for " + type_name(type_) +
                                                     " (a vendor plugin would)");
      PrecisionPlan p;
      p.threads = request.threads;
      if (asked == Dtype::bf16) {
        p.dtype = Dtype::bf16;
        p.autocast = true;
        p.reasons.push_back("bf16 autocast: requested (LibTorch's device-generic autocast for " + type_name(type_) + ")");
      } else {
        p.reasons.push_back(std::string("fp32: ") + (request.precision ? "requested" : "the default") +
                            ": the torch plugin knows no vendor rules for " + type_name(type_) +
                            (bf16_ ? "; bf16 autocast on request" : ""));
      }
      return p;
    });
  }
  Status apply(const PrecisionPlan& plan) noexcept override {
    return guarded("torch apply", [&]() -> Status {
      if (plan.dtype == Dtype::fp16 || (plan.dtype == Dtype::bf16 && !bf16_) || plan.tf32)
        return Status(StatusCode::not_supported, "the torch plugin runs fp32" + std::string(bf16_ ? " or bf16" : ""));
      if (plan.threads > 0) at::set_num_threads(plan.threads);
      const bool autocast = plan.autocast && plan.dtype == Dtype::bf16;
      if (!compat::accelerator_autocast(type_)) return Status();
      if (autocast) compat::set_autocast_dtype(type_, at::kBFloat16);
      compat::set_autocast_enabled(type_, autocast);
      return Status();
    });
  }
  Result<std::vector<AppliedValue>> read_back() noexcept override {
    return guarded("torch read_back", [&]() -> Result<std::vector<AppliedValue>> {
      std::vector<AppliedValue> v{{"num_threads", std::to_string(at::get_num_threads()), PlanField::threads}};
      if (compat::accelerator_autocast(type_)) {
        v.push_back({"autocast_enabled", compat::autocast_enabled(type_) ? "true" : "false", PlanField::autocast});
        v.push_back({"autocast_dtype", c10::toString(compat::autocast_dtype(type_)), PlanField::autocast_dtype});
      }
      return v;
    });
  }

 private:
  c10::DeviceType type_;
  bool bf16_;
};

// LibTorch's at::_fused_adamw_ on the device (support::AtenFusedAdamW), where it has a kernel,
// offered beside the unfused update (torch::optim::AdamW's per-parameter operations) so that the
// runtime times both on the device and keeps the faster (adamw_choice.hpp), as it does for the
// CPU plugin's kernels: a fused kernel is not assumed to win on a device nobody measured.
class GenericOptimizer final : public Optimizer {
 public:
  static constexpr const char* kFused = "aten-fused";
  static constexpr const char* kUnfused = "unfused";

  explicit GenericOptimizer(c10::DeviceType type) : type_(type) {}
  std::string implementation() const override { return "ATen fused AdamW (at::_fused_adamw_, " + type_name(type_) + ")"; }
  std::vector<AdamWImplementation> adamw_implementations() const override {
    return {AdamWImplementation{kFused, implementation(), /*master_weights=*/false},
            AdamWImplementation{kUnfused, "torch::optim::AdamW (unfused, " + type_name(type_) + ")", false}};
  }
  Result<std::shared_ptr<torch::optim::Optimizer>> create_adamw(const std::vector<at::Tensor>& params,
                                                                const AdamWConfig& c) noexcept override {
    return guarded("torch fused AdamW", [&]() -> Result<std::shared_ptr<torch::optim::Optimizer>> {
      const bool unfused = c.implementation == kUnfused;
      if (!unfused && !c.implementation.empty() && c.implementation != kFused)
        return Status(StatusCode::invalid_argument, "no AdamW implementation '" + c.implementation +
                                                        "' in the torch plugin (it offers: aten-fused, unfused)");
      if (c.master_weights) return Status(StatusCode::not_supported, "the torch plugin's AdamW keeps no master weights");
      if (unfused && c.maximize)
        return Status(StatusCode::not_supported, "torch::optim::AdamW has no maximize (aten-fused has)");
      for (const auto& p : params)
        TORCH_CHECK(p.device().type() == type_, "the torch plugin's AdamW takes ", type_name(type_),
                    " parameters; got one on ", p.device(), " (move the model to the device first)");
      if (unfused) return std::shared_ptr<torch::optim::Optimizer>(std::make_shared<torch::optim::AdamW>(params, support::adamw_options(c)));
      return std::shared_ptr<torch::optim::Optimizer>(
          std::make_shared<support::AtenFusedAdamW>(params, support::adamw_options(c), c.maximize));
    });
  }

 private:
  c10::DeviceType type_;
};

class GenericDevice final : public Device {
 public:
  GenericDevice(c10::DeviceType type, int index) : type_(type), index_(index), info_(device_info(type, index, /*opened=*/true)) {}
  const DeviceInfo& info() const noexcept override { return info_; }
  Result<std::shared_ptr<Precision>> precision() noexcept override {
    return guarded("torch precision", [&]() -> Result<std::shared_ptr<Precision>> {
      return std::shared_ptr<Precision>(
          std::make_shared<GenericPrecision>(type_, info_.capabilities.has(Capability::bf16)));
    });
  }
  Result<std::shared_ptr<Optimizer>> optimizer() noexcept override {
    return guarded("torch optimizer", [&]() -> Result<std::shared_ptr<Optimizer>> {
      if (!compat::aten_fused_adamw_registered(type_))
        return Status(StatusCode::not_supported,
                      "LibTorch " + compat::libtorch_version() + " has no at::_fused_adamw_ kernel for " + type_name(type_));
      return std::shared_ptr<Optimizer>(std::make_shared<GenericOptimizer>(type_));
    });
  }
  Result<MemoryStats> memory() noexcept override {
    return guarded("torch memory", [&]() -> Result<MemoryStats> {
      try {
        const auto m = compat::accelerator_memory(index_);
        MemoryStats s;
        s.in_use = m.allocated;
        s.peak = m.peak;
        s.reserved = m.reserved;
        s.total = m.total;
        s.available = m.free;
        s.source = "LibTorch's device-generic allocator statistics (at::accelerator::getDeviceStats, getMemoryInfo)";
        return s;
      } catch (const c10::Error& e) {
        return Status(StatusCode::not_supported, "LibTorch gives no memory figures for " + info_.torch_device + ": " +
                                                     host::first_line(e.what_without_backtrace()));
      }
    });
  }
  Status reset_peak_memory() noexcept override {
    return guarded("torch reset_peak_memory", [&]() -> Status {
      try {
        compat::accelerator_reset_peak(index_);
        return Status();
      } catch (const c10::Error& e) {
        return Status(StatusCode::not_supported, "LibTorch keeps no peak for " + info_.torch_device + ": " +
                                                     host::first_line(e.what_without_backtrace()));
      }
    });
  }
  Status empty_cache() noexcept override {
    return guarded("torch empty_cache", [&]() -> Status {
      try {
        compat::accelerator_empty_cache();
        return Status();
      } catch (const c10::Error& e) {
        return Status(StatusCode::not_supported, "LibTorch has no allocator cache to empty for " + info_.torch_device +
                                                     ": " + host::first_line(e.what_without_backtrace()));
      }
    });
  }
  Result<std::shared_ptr<CapturedStep>> capture_step(torch::optim::Optimizer& optimizer, std::function<void()> step,
                                                     int warmup) noexcept override {
    return guarded("torch capture_step", [&]() -> Result<std::shared_ptr<CapturedStep>> {
      if (const std::string why = graph_refusal(type_); !why.empty()) return Status(StatusCode::not_supported, why);
      return std::shared_ptr<CapturedStep>(std::make_shared<GenericCapturedStep>(optimizer, std::move(step), warmup));
    });
  }

 private:
  c10::DeviceType type_;
  int index_;
  DeviceInfo info_;
};

class TorchPlugin final : public Plugin {
 public:
  static constexpr const char* kName = "torch";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "device-generic: the accelerator LibTorch reports through at::accelerator, where no vendor plugin serves it";

  Result<ProbeReport> probe() noexcept override {
    return guarded("torch probe", [&]() -> Result<ProbeReport> {
      ProbeReport r;
      if (!compat::accelerator_api()) {
        r.reasons.push_back("LibTorch " + compat::libtorch_version() +
                            " has no device-generic API (at::accelerator, from 2.6): the torch plugin offers nothing");
        return r;
      }
      const auto type = compat::accelerator_type();
      if (!type) {
        r.reasons.push_back("LibTorch " + compat::libtorch_version() +
                            " reports no accelerator (at::accelerator::getAccelerator): nothing to offer");
        return r;
      }
      int count = 0;
      try {
        count = compat::accelerator_device_count();
      } catch (const c10::Error& e) {
        r.reasons.push_back("LibTorch reports " + type_name(*type) + " but counting its devices failed: " +
                            host::first_line(e.what_without_backtrace()));
        return r;
      }
      if (count <= 0) {
        r.reasons.push_back("LibTorch reports " + type_name(*type) + " with no device");
        return r;
      }
      for (int i = 0; i < count; ++i) r.devices.push_back(device_info(*type, i, /*opened=*/false));
      r.score = kScore;
      r.reasons.push_back(std::to_string(count) + " " + type_name(*type) +
                          " device(s) through LibTorch's device-generic API; a vendor plugin for the same type ranks "
                          "above (kind other, score " + std::to_string(kScore) + ")");
      return r;
    });
  }

  Result<std::shared_ptr<Device>> open(std::size_t index) noexcept override {
    return guarded("torch open", [&]() -> Result<std::shared_ptr<Device>> {
      const auto type = compat::accelerator_type();
      if (!type) return Status(StatusCode::unavailable, "torch: LibTorch reports no accelerator any more");
      const int count = compat::accelerator_device_count();
      if (index >= static_cast<std::size_t>(count))
        return Status(StatusCode::invalid_argument, "torch: LibTorch reports " + std::to_string(count) + " " +
                                                        type_name(*type) + " device(s); there is no index " +
                                                        std::to_string(index));
      const int i = static_cast<int>(index);
      // Open it as a program would: a tensor there and a synchronisation. A runtime that fails
      // is refused with LibTorch's own message.
      try {
        (void)at::empty({1}, at::TensorOptions().device(c10::Device(*type, static_cast<c10::DeviceIndex>(i))));
        compat::accelerator_synchronize(i);
      } catch (const c10::Error& e) {
        return Status(StatusCode::unavailable, "torch:" + std::to_string(i) + " (" + type_name(*type) +
                                                   "): LibTorch could not open it: " + host::first_line(e.what_without_backtrace()));
      }
      return std::shared_ptr<Device>(std::make_shared<GenericDevice>(*type, i));
    });
  }
};

}  // namespace
}  // namespace accelkit::torch_generic

ACCELKIT_PLUGIN(accelkit::torch_generic::TorchPlugin)
