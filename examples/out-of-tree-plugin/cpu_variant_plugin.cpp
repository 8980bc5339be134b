// cpu_variant: a CPU backend variant - the same CPU as the cpu plugin, fp32, with its own
// AdamW (simple_adamw.hpp). It scores below the cpu plugin, so negotiation picks it only when
// asked to: `--device cpu_variant`, or `prefer = ["cpu_variant"]` in a config.
#include <accelkit/sdk/host_paths.hpp>
#include <accelkit/sdk/monitor.hpp>
#include <accelkit/sdk/optimizer.hpp>
#include <accelkit/sdk/plugin.hpp>
#include <accelkit/sdk/precision.hpp>
#include <accelkit/sdk/support/adamw_state.hpp>
#include <accelkit/sdk/support/host_file.hpp>
#include <accelkit/sdk/support/plausible.hpp>
#include <accelkit/sdk/torch_compat.hpp>

#include <ATen/Parallel.h>

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "simple_adamw.hpp"

namespace cpu_variant {
using namespace accelkit;

// The rest of the first line of a /proc file that starts with `key`, less a ':' separator.
// Read through the SDK's bounded reader: a FIFO or a huge file there never blocks the plugin.
std::string proc_field(const char* file, const std::string& key) {
  const host::ReadResult r = host::read_file(procfs_path(file));
  std::istringstream in(r.ok() ? r.text : std::string());
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, key.size(), key) == 0) {
      auto value = line.substr(key.size());
      value.erase(0, value.find_first_not_of(" \t"));
      if (!value.empty() && value[0] == ':') value.erase(0, value.find_first_not_of(" \t", 1));
      return value;
    }
  return {};
}

// A /proc/meminfo figure in bytes; 0 (unknown) when it is missing or cannot be memory.
std::uint64_t meminfo_bytes(const char* key) {
  const std::string field = proc_field("meminfo", std::string(key) + ":");  // "24682416 kB"
  const auto kib = host::parse_int(field.substr(0, field.find(' ')));
  if (!kib || *kib < 0) return 0;
  return plausible::kib_to_bytes(static_cast<std::uint64_t>(*kib)).value_or(0);
}

class VariantPrecision final : public Precision {
 public:
  Result<PrecisionPlan> plan(const PrecisionRequest& r) noexcept override {
    return guarded("cpu_variant plan", [&]() -> Result<PrecisionPlan> {
      if (r.precision && *r.precision != Dtype::fp32)
        return Status(StatusCode::not_supported, std::string("cpu_variant runs fp32 only, not ") + to_string(*r.precision));
      if (r.tf32 == Toggle::on) return Status(StatusCode::not_supported, "TF32 is not a CPU feature");
      PrecisionPlan p;
      p.threads = r.threads;
      p.reasons = {"fp32: cpu_variant has no reduced-precision path",
                   r.threads > 0 ? "threads: as requested" : "threads: LibTorch's default"};
      return p;
    });
  }
  Status apply(const PrecisionPlan& p) noexcept override {
    return guarded("cpu_variant apply", [&]() -> Status {
      if (p.dtype != Dtype::fp32 || p.tf32) return Status(StatusCode::not_supported, "cpu_variant runs fp32 only");
      if (p.threads > 0) at::set_num_threads(p.threads);
      compat::set_autocast_enabled(at::kCPU, false);
      return Status::ok();
    });
  }
  Result<std::vector<AppliedValue>> read_back() noexcept override {
    return guarded("cpu_variant read_back", [] {
      return std::vector<AppliedValue>{
          {"num_threads", std::to_string(at::get_num_threads()), PlanField::threads},
          {"autocast_cpu_enabled", compat::autocast_enabled(at::kCPU) ? "true" : "false", PlanField::autocast}};
    });
  }
};

class VariantOptimizer final : public Optimizer {
 public:
  std::string implementation() const override {
    return "cpu_variant SimpleAdamW (one pass, intra-op threads: " + std::to_string(at::get_num_threads()) + ")";
  }
  Result<std::shared_ptr<torch::optim::Optimizer>> create_adamw(const std::vector<at::Tensor>& params,
                                                                const AdamWConfig& c) noexcept override {
    if (c.master_weights) return Status(StatusCode::not_supported, "SimpleAdamW keeps no fp32 master weights");
    return guarded("cpu_variant create_adamw", [&]() -> std::shared_ptr<torch::optim::Optimizer> {
      return std::make_shared<SimpleAdamW>(params, support::adamw_options(c), c.maximize);
    });
  }
};

// Memory from /proc/meminfo; utilisation from /proc/stat's "cpu" line, over the last interval.
class VariantMonitor final : public Monitor {
 public:
  Result<std::vector<Reading>> sample() noexcept override {
    return guarded("cpu_variant sample", [&] {
      std::vector<Reading> out;
      const auto total = meminfo_bytes("MemTotal"), avail = meminfo_bytes("MemAvailable");
      Reading used{reading::memory_used_bytes, std::nullopt, "bytes", "/proc/meminfo", ""};
      if (total) used.value = static_cast<double>(total - avail);
      out.push_back(used);
      out.push_back({reading::memory_total_bytes, total ? std::optional<double>(total) : std::nullopt, "bytes",
                     "/proc/meminfo", ""});
      std::istringstream cpu(proc_field("stat", "cpu "));
      std::vector<std::uint64_t> ticks{std::istream_iterator<std::uint64_t>(cpu), {}};
      Reading util{reading::utilisation_pct, std::nullopt, "%", "/proc/stat", "n/a: first sample"};
      if (ticks.size() >= 4) {
        const auto all = std::accumulate(ticks.begin(), ticks.end(), std::uint64_t{0});
        const auto idle = ticks[3] + (ticks.size() > 4 ? ticks[4] : 0);
        if (prev_all_ && all > prev_all_) {
          util.value = 100.0 * (1.0 - double(idle - prev_idle_) / double(all - prev_all_));
          util.note.clear();
        }
        prev_all_ = all;
        prev_idle_ = idle;
      }
      out.push_back(util);
      out.push_back({reading::temperature_c, std::nullopt, "C", "", "n/a: cpu_variant reads no sensors"});
      return out;
    });
  }

 private:
  std::uint64_t prev_all_ = 0, prev_idle_ = 0;
};

class VariantDevice final : public Device {
 public:
  explicit VariantDevice(DeviceInfo info) : info_(std::move(info)) {}
  const DeviceInfo& info() const noexcept override { return info_; }
  Result<std::shared_ptr<Precision>> precision() noexcept override {
    return guarded("cpu_variant precision", [&]() -> std::shared_ptr<Precision> { return precision_; });
  }
  Result<std::shared_ptr<Optimizer>> optimizer() noexcept override {
    return guarded("cpu_variant optimizer", [&]() -> std::shared_ptr<Optimizer> { return optimizer_; });
  }
  Result<std::shared_ptr<Monitor>> monitor() noexcept override {
    return guarded("cpu_variant monitor", [&]() -> std::shared_ptr<Monitor> { return std::make_shared<VariantMonitor>(); });
  }

 private:
  DeviceInfo info_;
  std::shared_ptr<Precision> precision_ = std::make_shared<VariantPrecision>();
  std::shared_ptr<Optimizer> optimizer_ = std::make_shared<VariantOptimizer>();
};

class VariantPlugin final : public Plugin {
 public:
  static constexpr const char* kName = "cpu_variant";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription = "CPU variant (out of tree): fp32, its own one-pass AdamW";

  Result<ProbeReport> probe() noexcept override {
    return guarded("cpu_variant probe", [&] {
      DeviceInfo d;
      d.id = "cpu_variant:0";
      d.torch_device = "cpu";
      d.name = proc_field("cpuinfo", "model name");
      if (d.name.empty()) d.name = "CPU";
      d.vendor = proc_field("cpuinfo", "vendor_id");
      d.kind = DeviceKind::cpu;
      d.memory_bytes = meminfo_bytes("MemTotal");
      d.capabilities.add(Capability::fp32).add(Capability::fused_adamw).add(Capability::utilisation);
      d.capabilities.set("optimizer", "SimpleAdamW");
      d.properties.push_back({"logical cpus", std::to_string(std::thread::hardware_concurrency())});
      ProbeReport r;
      r.score = 5;  // below the cpu plugin (10): chosen only when preferred or requested
      r.devices.push_back(d);
      r.reasons.push_back("the CPU is always usable; fp32 only, so ranked below the cpu plugin");
      device_ = d;
      return r;
    });
  }
  Result<std::shared_ptr<Device>> open(std::size_t index) noexcept override {
    return guarded("cpu_variant open", [&]() -> Result<std::shared_ptr<Device>> {
      if (index != 0) return Status(StatusCode::invalid_argument, "cpu_variant has one device (cpu_variant:0)");
      if (!device_) probe();
      return std::shared_ptr<Device>(std::make_shared<VariantDevice>(*device_));
    });
  }

 private:
  std::optional<DeviceInfo> device_;
};

}  // namespace cpu_variant

ACCELKIT_PLUGIN(cpu_variant::VariantPlugin)
