// The LibTorch side of the ROCm plugin: whether this LibTorch drives AMD GPUs, and the
// process-wide settings an architecture needs before the first GPU work.
#pragma once

#include <string>
#include <vector>

#include <accelkit/sdk/precision.hpp>

#include "arch_rules.hpp"
#include "device_memory.hpp"
#include "torch_backend.hpp"

namespace accelkit::rocm {

// Compile-time HIP macro, else LibTorch's HIP libraries loaded in the process.
TorchBackend detect_torch_backend();

// Sets the architecture's environment (only variables the user has not set) and its memory
// fraction on `torch_index`. Returns what was done, one line each.
std::vector<std::string> activate_arch(const ArchRules& rules, int torch_index);

// LibTorch's HIP caching allocator on `torch_index` (a GPU LibTorch drives): its figures, a new
// peak, its cache given back to the driver. Status(not_supported) where the plugin was built
// against a LibTorch without c10_hip; what LibTorch throws comes out as an exception.
Result<AllocatorFigures> hip_allocator_figures(int torch_index);
Status hip_reset_peak_stats(int torch_index);
Status hip_empty_cache();

// Autocast for device type CUDA (what ROCm builds call AMD GPUs).
Status apply_autocast(const PrecisionPlan& plan);
std::vector<AppliedValue> read_back_values(const ArchRules& rules);

}  // namespace accelkit::rocm
