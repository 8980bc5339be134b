#include "cuda_device.hpp"

#include "cuda_precision.hpp"
#include "nvml_monitor.hpp"
#ifdef ACCELKIT_CUDA_TORCH_GLUE
#include <ATen/Functions.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "cuda_captured_step.hpp"
#include "cuda_optimizer.hpp"
#endif
#ifdef ACCELKIT_CUDA_NCCL
#include "nccl_group.hpp"
#endif

namespace accelkit::cuda {

#ifdef ACCELKIT_CUDA_TORCH_GLUE
namespace {
// LibTorch's caching allocator sizes its per-device tables at CUDA's lazy initialisation, and
// its statistics calls reject a device before that ("Invalid device argument"): a program may
// ask for memory figures before its first CUDA tensor. An empty tensor on the device runs that
// initialisation the same way in every LibTorch version (allocating nothing).
void ensure_allocator(int ordinal) {
  (void)at::empty({0}, at::TensorOptions().device(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(ordinal))));
}
}  // namespace
#endif

CudaDevice::CudaDevice(GpuFacts gpu, DeviceInfo info, std::string nvml_note)
    : CachedDevice("cuda", std::move(info)), gpu_(std::move(gpu)), nvml_note_(std::move(nvml_note)) {}

Result<std::shared_ptr<Precision>> CudaDevice::make_precision() {
  return std::shared_ptr<Precision>(std::make_shared<CudaPrecision>(ComputeCapability{gpu_.cc_major, gpu_.cc_minor}));
}

Result<std::shared_ptr<Optimizer>> CudaDevice::optimizer() noexcept {
  return guarded("cuda optimizer", [&]() -> Result<std::shared_ptr<Optimizer>> {
#ifdef ACCELKIT_CUDA_TORCH_GLUE
    if (info().capabilities.has(Capability::fused_adamw))
      return std::shared_ptr<Optimizer>(std::make_shared<CudaOptimizer>(gpu_.ordinal));
    return Status(StatusCode::not_supported, "the fused AdamW kernel was not built for SM " +
                                                 std::to_string(gpu_.cc_major) + "." + std::to_string(gpu_.cc_minor) +
                                                 " (set CMAKE_CUDA_ARCHITECTURES)");
#else
    return Status(StatusCode::not_supported,
                  "this cuda plugin was built without its fused AdamW (no CUDA LibTorch or no nvcc at build time)");
#endif
  });
}

Result<std::shared_ptr<Monitor>> CudaDevice::make_monitor() {
  return std::shared_ptr<Monitor>(std::make_shared<NvmlMonitor>(process_nvml(), gpu_.nvml, nvml_note_));
}

Result<MemoryStats> CudaDevice::memory() noexcept {
  return guarded("cuda memory", [&] {
    MemoryStats s;
    std::string nvml_part;
    if (const NvmlApi* nvml = process_nvml(); nvml && gpu_.nvml && nvml->memory) {
      NvmlMemory mem{};
      if (nvml->memory(gpu_.nvml, &mem) == 0) {
        s.total = mem.total;
        s.available = mem.free;
        nvml_part = "; NVML memory info (total, free)";
      }
    }
    if (!s.total && gpu_.memory_bytes > 0) s.total = gpu_.memory_bytes;
#ifdef ACCELKIT_CUDA_TORCH_GLUE
    if (info().capabilities.has(Capability::memory_stats)) {
      ensure_allocator(gpu_.ordinal);
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(gpu_.ordinal));
      // Index 0 of each StatArray is StatType::AGGREGATE (both pools) in every LibTorch.
      s.in_use = static_cast<std::uint64_t>(stats.allocated_bytes[0].current);
      s.peak = static_cast<std::uint64_t>(stats.allocated_bytes[0].peak);
      s.reserved = static_cast<std::uint64_t>(stats.reserved_bytes[0].current);
      s.source = "LibTorch's CUDA caching allocator (allocated, peak, reserved)" + nvml_part;
      s.note = "this process's tensors on " + info().id + "; reserved is what the allocator's cache holds";
      return s;
    }
#endif
    s.source = nvml_part.empty() ? "the driver's device facts" : nvml_part.substr(2);
    s.note = "no allocator figures: LibTorch in this process has no CUDA";
    return s;
  });
}

Status CudaDevice::reset_peak_memory() noexcept {
#ifdef ACCELKIT_CUDA_TORCH_GLUE
  if (info().capabilities.has(Capability::memory_stats)) {
    try {
      ensure_allocator(gpu_.ordinal);
      c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(gpu_.ordinal));
      return Status();
    } catch (const std::exception& e) {
      return Status(StatusCode::internal, std::string("cuda reset_peak_memory: ") + e.what());
    }
  }
#endif
  return Status(StatusCode::not_supported, "LibTorch in this process has no CUDA: no allocator peak to reset");
}

Status CudaDevice::empty_cache() noexcept {
#ifdef ACCELKIT_CUDA_TORCH_GLUE
  if (info().capabilities.has(Capability::memory_stats)) {
    try {
      c10::cuda::CUDACachingAllocator::emptyCache();
      return Status();
    } catch (const std::exception& e) {
      return Status(StatusCode::internal, std::string("cuda empty_cache: ") + e.what());
    }
  }
#endif
  return Status(StatusCode::not_supported, "LibTorch in this process has no CUDA: no allocator cache to empty");
}

Result<std::shared_ptr<CapturedStep>> CudaDevice::capture_step(torch::optim::Optimizer& optimizer,
                                                               std::function<void()> step, int warmup) noexcept {
  return guarded("cuda capture_step", [&]() -> Result<std::shared_ptr<CapturedStep>> {
#ifdef ACCELKIT_CUDA_TORCH_GLUE
    if (!info().capabilities.has(Capability::graph_capture))
      return Status(StatusCode::not_supported, "LibTorch in this process has no CUDA, so " + info().id + " captures nothing");
    return std::shared_ptr<CapturedStep>(
        std::make_shared<CudaCapturedStep>(gpu_.ordinal, optimizer, std::move(step), warmup));
#else
    (void)optimizer;
    (void)step;
    (void)warmup;
#ifdef ACCELKIT_CUDA_NO_TORCH_CUDA
    return Status(StatusCode::not_supported, "LibTorch here has no CUDA, so this cuda plugin has no graph capture");
#else
    return Status(StatusCode::not_supported,
                  "this cuda plugin was built without its LibTorch-CUDA glue (nvcc was missing at build time), so it "
                  "has no graph capture");
#endif
#endif
  });
}

Result<std::shared_ptr<c10d::ProcessGroup>> CudaDevice::process_group(const CollectiveRequest& request) noexcept {
  return guarded("cuda process_group", [&]() -> Result<std::shared_ptr<c10d::ProcessGroup>> {
    if (request.backend != "nccl")
      return Status(StatusCode::not_supported, "the cuda plugin makes NCCL process groups only, not " + request.backend);
#ifdef ACCELKIT_CUDA_NCCL
    return make_nccl_group(request, gpu_.ordinal);
#elif defined(ACCELKIT_CUDA_NO_TORCH_CUDA)
    return Status(StatusCode::unavailable, "LibTorch here has no CUDA, so it has no NCCL process group");
#else
    return Status(StatusCode::unavailable,
                  "this cuda plugin was built without NCCL process groups (its LibTorch has no NCCL, or nccl.h was "
                  "not found at build time: set NCCL_INCLUDE_DIR)");
#endif
  });
}

}  // namespace accelkit::cuda
