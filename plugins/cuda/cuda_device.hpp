// accelkit::Device for one NVIDIA GPU ("cuda:N"). Hands out one Precision and one Monitor;
// the Optimizer (fused AdamW) exists where LibTorch has CUDA and the kernel was built.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <accelkit/sdk/support/cached_device.hpp>

#include "cuda_probe.hpp"

namespace accelkit::cuda {

class CudaDevice final : public support::CachedDevice {
 public:
  // `nvml_note` says why telemetry is n/a when NVML is unavailable.
  CudaDevice(GpuFacts gpu, DeviceInfo info, std::string nvml_note);

  Result<std::shared_ptr<Optimizer>> optimizer() noexcept override;
  // LibTorch's caching allocator on this GPU (in use, peak, reserved; where LibTorch has CUDA)
  // and NVML's total and free memory.
  Result<MemoryStats> memory() noexcept override;
  Status reset_peak_memory() noexcept override;
  Status empty_cache() noexcept override;
  // GraphedStep behind accelkit::CapturedStep; not_supported without the LibTorch-CUDA glue.
  Result<std::shared_ptr<CapturedStep>> capture_step(torch::optim::Optimizer& optimizer, std::function<void()> step,
                                                     int warmup) noexcept override;
  // c10d's ProcessGroupNCCL on this GPU (nccl_group.hpp); a reason where this plugin was built
  // without it.
  Result<std::shared_ptr<c10d::ProcessGroup>> process_group(const CollectiveRequest& request) noexcept override;

 private:
  Result<std::shared_ptr<Precision>> make_precision() override;
  Result<std::shared_ptr<Monitor>> make_monitor() override;

  GpuFacts gpu_;
  std::string nvml_note_;
};

}  // namespace accelkit::cuda
