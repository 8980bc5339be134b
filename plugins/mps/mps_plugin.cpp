// The MPS plugin (Apple platforms): one Apple GPU through LibTorch's MPS backend. The
// decisions are mps_rules' (portable, tested everywhere); this file probes and applies them.
#include <mutex>
#include <optional>

#include <ATen/Context.h>
#include <accelkit/sdk/monitor.hpp>
#include <accelkit/sdk/plugin.hpp>
#include <accelkit/sdk/precision.hpp>
#include <accelkit/sdk/torch_compat.hpp>

#include "mps_host.hpp"
#include "mps_memory.hpp"
#include "mps_rules.hpp"

namespace accelkit::mps {
namespace {

MpsProbeValues probe_values() {
  MpsProbeValues v;
  v.brand = sysctl_string("machdep.cpu.brand_string");
  v.hw_model = sysctl_string("hw.model");
  v.os_version = sysctl_string("kern.osproductversion");
  v.memory_bytes = sysctl_u64("hw.memsize");
  v.mps_available = at::hasMPS();
  v.torch = {TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR};
  return v;
}

class MpsPrecision final : public Precision {
 public:
  explicit MpsPrecision(MpsCapabilities caps) : caps_(std::move(caps)) {}

  Result<PrecisionPlan> plan(const PrecisionRequest& request) noexcept override {
    return guarded("mps precision plan", [&]() -> Result<PrecisionPlan> {
      const std::optional<Dtype>& want = request.precision;
      if (request.tf32 == Toggle::on) return Status(StatusCode::not_supported, "TF32 is an NVIDIA feature, not MPS");
      if ((want == Dtype::bf16 && !caps_.bf16) || (want == Dtype::fp16 && !caps_.autocast))
        return Status(StatusCode::not_supported, std::string("precision ") + to_string(*want) +
                                                     " is not available on MPS here: " + caps_.reasons.front());
      if (request.threads < 0)
        return Status(StatusCode::invalid_argument, "threads must be >= 0, got " + std::to_string(request.threads));
      PrecisionPlan p;
      p.dtype = want.value_or(dtype_from_string(caps_.dtype).value_or(Dtype::fp32));
      p.autocast = p.dtype != Dtype::fp32;
      p.loss_scaling = p.dtype == Dtype::fp16;
      p.threads = request.threads;
      p.reasons = caps_.reasons;
      return p;
    });
  }
  Status apply(const PrecisionPlan& plan) noexcept override {
    return guarded("mps precision apply", [&]() -> Status {
      if (plan.tf32) return Status(StatusCode::not_supported, "TF32 is not an MPS feature");
      const bool on = plan.autocast && plan.dtype != Dtype::fp32;
      if (!compat::autocast_available(c10::DeviceType::MPS))
        return on ? Status(StatusCode::not_supported, "this LibTorch has no MPS autocast (it arrived in 2.5)")
                  : Status::ok();
      if (on) compat::set_autocast_dtype(c10::DeviceType::MPS, plan.dtype == Dtype::bf16 ? at::kBFloat16 : at::kHalf);
      compat::set_autocast_enabled(c10::DeviceType::MPS, on);
      return Status::ok();
    });
  }
  Result<std::vector<AppliedValue>> read_back() noexcept override {
    return guarded("mps precision read_back", [] {
      std::vector<AppliedValue> v;
      if (compat::autocast_available(c10::DeviceType::MPS)) {
        v.push_back({"autocast_mps_enabled", compat::autocast_enabled(c10::DeviceType::MPS) ? "true" : "false",
                     PlanField::autocast});
        v.push_back({"autocast_mps_dtype", c10::toString(compat::autocast_dtype(c10::DeviceType::MPS)),
                     PlanField::autocast_dtype});
      }
      return v;
    });
  }

 private:
  MpsCapabilities caps_;
};

class MpsMonitor final : public Monitor {
 public:
  explicit MpsMonitor(std::uint64_t memory) : memory_(memory) {}
  Result<std::vector<Reading>> sample() noexcept override {
    return guarded("mps monitor sample", [&] {
      std::vector<Reading> out;
      Reading pressure{"thermal_pressure", std::nullopt, "level", "notify com.apple.system.thermalpressurelevel", ""};
      if (auto level = thermal_pressure_level()) {
        pressure.value = *level;
        pressure.note = thermal_pressure_name(*level);
      } else {
        pressure.note = "n/a: the thermal pressure notification is not readable";
      }
      out.push_back(std::move(pressure));
      out.push_back({reading::temperature_c, std::nullopt, "C", "", "n/a: macOS exposes thermal pressure, not temperatures"});
      out.push_back({reading::memory_total_bytes, memory_ ? std::optional<double>(static_cast<double>(memory_)) : std::nullopt,
                     "bytes", "sysctl hw.memsize (unified memory)", ""});
      return out;
    });
  }

 private:
  std::uint64_t memory_;
};

class MpsDevice final : public Device {
 public:
  MpsDevice(DeviceInfo info, MpsCapabilities caps) : info_(std::move(info)), caps_(std::move(caps)) {}
  const DeviceInfo& info() const noexcept override { return info_; }
  Result<std::shared_ptr<Precision>> precision() noexcept override {
    return guarded("mps precision", [&]() -> std::shared_ptr<Precision> { return std::make_shared<MpsPrecision>(caps_); });
  }
  Result<std::shared_ptr<Optimizer>> optimizer() noexcept override {
    return Status(StatusCode::not_supported, "the mps plugin has no optimizer of its own; torch::optim::AdamW is used");
  }
  Result<std::shared_ptr<Monitor>> monitor() noexcept override {
    return guarded("mps monitor", [&]() -> std::shared_ptr<Monitor> { return std::make_shared<MpsMonitor>(info_.memory_bytes); });
  }
  // LibTorch's MPS allocator (mps_memory.hpp); no peak.
  Result<MemoryStats> memory() noexcept override { return read_mps_memory(info_.memory_bytes); }
  Status reset_peak_memory() noexcept override { return reset_mps_peak(); }
  Status empty_cache() noexcept override { return empty_mps_cache(); }

 private:
  DeviceInfo info_;
  MpsCapabilities caps_;
};

}  // namespace

class MpsPlugin final : public Plugin {
 public:
  static constexpr const char* kName = "mps";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription = "Apple GPUs (MPS): fp16/bf16 by chip and macOS, thermal pressure";

  Result<ProbeReport> probe() noexcept override {
    return guarded("mps probe", [&] {
      std::lock_guard<std::mutex> lock(mutex_);
      values_ = probe_values();
      caps_ = mps_capabilities(*values_);
      ProbeReport r;
      r.reasons = caps_->reasons;
      DeviceInfo d;
      d.id = "mps:0";
      d.torch_device = caps_->usable ? "mps" : "";
      d.name = values_->brand.empty() ? "Apple GPU" : values_->brand + " GPU";
      d.vendor = "Apple";
      d.kind = caps_->chip == ChipFamily::intel ? DeviceKind::discrete_gpu : DeviceKind::integrated_gpu;
      d.memory_bytes = values_->memory_bytes;
      d.capabilities.add(Capability::fp32);
      if (caps_->autocast) d.capabilities.add(Capability::fp16);
      if (caps_->bf16) d.capabilities.add(Capability::bf16);
      d.capabilities.add(Capability::thermal);
      if (caps_->usable && mps_memory_available()) d.capabilities.add(Capability::memory_stats);
      d.capabilities.set("chip", to_string(caps_->chip));
      d.capabilities.set(kCollectivesKey, "gloo");  // PyTorch's MPS runs collectives through Gloo
      d.properties = {{"hw.model", values_->hw_model}, {"macOS", values_->os_version}};
      r.devices.push_back(std::move(d));
      r.score = caps_->usable ? 100 : 0;
      return r;
    });
  }

  Result<std::shared_ptr<Device>> open(std::size_t index) noexcept override {
    return guarded("mps open", [&]() -> Result<std::shared_ptr<Device>> {
      if (index != 0) return Status(StatusCode::invalid_argument, "the mps plugin has one device (mps:0)");
      auto report = probe();
      if (!report.ok()) return report.status();
      std::lock_guard<std::mutex> lock(mutex_);
      if (!caps_->usable) return Status(StatusCode::unavailable, caps_->reasons.front());
      return std::shared_ptr<Device>(std::make_shared<MpsDevice>(report.value().devices.front(), *caps_));
    });
  }

 private:
  std::mutex mutex_;
  std::optional<MpsProbeValues> values_;
  std::optional<MpsCapabilities> caps_;
};

}  // namespace accelkit::mps

ACCELKIT_PLUGIN(accelkit::mps::MpsPlugin)
