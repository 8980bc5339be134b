// The LibTorch side of the ROCm plugin: whether this LibTorch drives AMD GPUs, and the
// process-wide settings an architecture needs before the first GPU work.
#pragma once

#include <string>
#include <vector>

#include <accelkit/sdk/precision.hpp>

#include "arch_rules.hpp"
#include "torch_backend.hpp"

namespace accelkit::rocm {

// Compile-time HIP macro, else LibTorch's HIP libraries loaded in the process.
TorchBackend detect_torch_backend();

// Sets the architecture's environment (only variables the user has not set) and its memory
// fraction on `torch_index`. Returns what was done, one line each.
std::vector<std::string> activate_arch(const ArchRules& rules, int torch_index);

// Autocast for device type CUDA (what ROCm builds call AMD GPUs).
Status apply_autocast(const PrecisionPlan& plan);
std::vector<AppliedValue> read_back_values(const ArchRules& rules);

}  // namespace accelkit::rocm
