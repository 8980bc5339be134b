#include "rocm_torch.hpp"

#include <cstdlib>

#include <accelkit/sdk/torch_compat.hpp>
#include <torch/cuda.h>

// The HIP caching allocator (the memory fraction, the memory figures) exists only in ROCm
// builds of LibTorch; CMakeLists.txt defines ACCELKIT_ROCM_WITH_C10_HIP and links c10_hip when
// it is there.
#if ACCELKIT_ROCM_WITH_C10_HIP
#include <c10/hip/HIPCachingAllocator.h>
#endif

namespace accelkit::rocm {
namespace {

[[maybe_unused]] constexpr const char* kNoC10Hip =
    "the rocm plugin was built against a LibTorch without c10_hip: no HIP caching allocator to read";

}  // namespace

TorchBackend detect_torch_backend() {
  TorchBackend b;
#if ACCELKIT_ROCM_WITH_C10_HIP
  b.rocm_build = true;
  b.evidence = "built against LibTorch's c10_hip";
#elif defined(TORCH_HIP_VERSION)
  b.rocm_build = true;
  b.evidence = "built with TORCH_HIP_VERSION " + std::to_string(TORCH_HIP_VERSION);
#elif defined(USE_ROCM)
  b.rocm_build = true;
  b.evidence = "built with USE_ROCM";
#endif
  if (!b.rocm_build) {
    const std::string lib = loaded_torch_hip_library();
    if (!lib.empty()) {
      b.rocm_build = true;
      b.evidence = lib + " loaded";
    } else {
      b.evidence = "no libtorch_hip/libc10_hip in the process, built without TORCH_HIP_VERSION";
    }
  }
  if (b.rocm_build) b.device_count = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  b.allocator_stats = b.rocm_build && ACCELKIT_ROCM_WITH_C10_HIP != 0;
  return b;
}

std::vector<std::string> activate_arch(const ArchRules& rules, int torch_index) {
  std::vector<std::string> done;
  for (const EnvSetting& e : arch_environment(rules)) {
    if (const char* user = std::getenv(e.name.c_str())) {
      done.push_back(e.name + "=" + user + " kept (set by the user; the rules want " + e.value + ")");
      continue;
    }
    ::setenv(e.name.c_str(), e.value.c_str(), 0);
    done.push_back(e.name + "=" + e.value + " set: " + e.why);
  }
  if (rules.memory_fraction < 1.0) {
#if ACCELKIT_ROCM_WITH_C10_HIP
    c10::hip::HIPCachingAllocator::setMemoryFraction(rules.memory_fraction, static_cast<c10::DeviceIndex>(torch_index));
    done.push_back("memory fraction " + std::to_string(rules.memory_fraction) + " set on cuda:" + std::to_string(torch_index));
#else
    (void)torch_index;
    done.push_back("memory fraction " + std::to_string(rules.memory_fraction) +
                   " not set: the plugin was built against a LibTorch without c10_hip");
#endif
  }
  return done;
}

Result<AllocatorFigures> hip_allocator_figures(int torch_index) {
#if ACCELKIT_ROCM_WITH_C10_HIP
  const auto stats = c10::hip::HIPCachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(torch_index));
  // Index 0 of each StatArray is StatType::AGGREGATE (both pools) in every LibTorch.
  AllocatorFigures f;
  f.allocated = static_cast<std::uint64_t>(stats.allocated_bytes[0].current);
  f.peak = static_cast<std::uint64_t>(stats.allocated_bytes[0].peak);
  f.reserved = static_cast<std::uint64_t>(stats.reserved_bytes[0].current);
  return f;
#else
  (void)torch_index;
  return Status(StatusCode::not_supported, kNoC10Hip);
#endif
}

Status hip_reset_peak_stats(int torch_index) {
#if ACCELKIT_ROCM_WITH_C10_HIP
  c10::hip::HIPCachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(torch_index));
  return Status::ok();
#else
  (void)torch_index;
  return Status(StatusCode::not_supported, kNoC10Hip);
#endif
}

Status hip_empty_cache() {
#if ACCELKIT_ROCM_WITH_C10_HIP
  c10::hip::HIPCachingAllocator::emptyCache();
  return Status::ok();
#else
  return Status(StatusCode::not_supported, kNoC10Hip);
#endif
}

Status apply_autocast(const PrecisionPlan& plan) {
  if (plan.tf32) return Status(StatusCode::not_supported, "TF32 is not offered on AMD GPUs by this plugin");
  const bool on = plan.autocast && plan.dtype != Dtype::fp32;
  if (on) compat::set_autocast_dtype(at::kCUDA, plan.dtype == Dtype::bf16 ? at::kBFloat16 : at::kHalf);
  compat::set_autocast_enabled(at::kCUDA, on);
  return Status::ok();
}

std::vector<AppliedValue> read_back_values(const ArchRules& rules) {
  std::vector<AppliedValue> v{
      {"autocast_cuda_enabled", compat::autocast_enabled(at::kCUDA) ? "true" : "false", PlanField::autocast},
      {"autocast_cuda_dtype", c10::toString(compat::autocast_dtype(at::kCUDA)), PlanField::autocast_dtype},
  };
  for (const EnvSetting& e : arch_environment(rules)) {
    const char* now = std::getenv(e.name.c_str());
    v.push_back({"env " + e.name, now ? now : "(unset)"});
  }
  return v;
}

}  // namespace accelkit::rocm
