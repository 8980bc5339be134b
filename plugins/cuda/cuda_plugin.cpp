// The CUDA plugin: every GPU the driver shows, usable where LibTorch here has CUDA. Loads on
// any machine (the driver and NVML are dlopen()ed); entry points are noexcept via capture().
#include <mutex>
#include <optional>

#include <accelkit/plugin.hpp>

#include "cuda_device.hpp"
#include "cuda_probe.hpp"
#include "cuda_report.hpp"
#include "torch_cuda_status.hpp"

namespace accelkit::cuda {

class CudaPlugin final : public Plugin {
 public:
  static constexpr const char* kName = "cuda";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "CUDA: driver and NVML loaded at run time, bf16/TF32/fp16 by architecture, fused AdamW, graph capture";

  Result<ProbeReport> probe() noexcept override {
    return capture("cuda probe", [&] {
      std::lock_guard<std::mutex> lock(mutex_);
      return probe_locked();
    });
  }

  Result<std::shared_ptr<Device>> open(std::size_t index) noexcept override {
    return capture("cuda open", [&]() -> Result<std::shared_ptr<Device>> {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!last_) probe_locked();
      const auto& r = last_->report;
      if (index >= r.devices.size())
        return Status(StatusCode::invalid_argument, "no device cuda:" + std::to_string(index) + " (the driver shows " +
                                                        std::to_string(r.devices.size()) + ")");
      if (!r.usable[index])
        return Status(StatusCode::unavailable,
                      r.devices[index].id + " cannot be used: " +
                          (r.devices[index].warnings.empty() ? (r.reasons.empty() ? std::string("unknown") : r.reasons.front())
                                                             : r.devices[index].warnings.front()));
      return std::shared_ptr<Device>(std::make_shared<CudaDevice>(last_->probe.gpus[index], r.devices[index],
                                                                  last_->probe.nvml_error));
    });
  }

 private:
  struct Last {
    CudaProbe probe;
    CudaReport report;
  };

  ProbeReport probe_locked() {
    CudaProbe probe = probe_cuda();
    CudaReport report = make_cuda_report(probe, torch_cuda_status());
    ProbeReport out;
    out.score = report.score;
    out.devices = report.devices;
    out.reasons = report.reasons;
    out.warnings = report.warnings;
    last_ = Last{std::move(probe), std::move(report)};
    return out;
  }

  std::mutex mutex_;
  std::optional<Last> last_;
};

}  // namespace accelkit::cuda

ACCELKIT_PLUGIN(accelkit::cuda::CudaPlugin)
