// The LibTorch side of the xpu plugin: whether this LibTorch drives Intel GPUs (device type
// XPU), device-generic autocast for XPU, TF32 for fp32 matmuls, and the XPU caching
// allocator's figures through LibTorch's device-generic memory API.
#pragma once

#include <vector>

#include <accelkit/sdk/precision.hpp>

#include "xpu_memory.hpp"
#include "xpu_report.hpp"

namespace accelkit::xpu {

// An XPU device guard registered in this process (LibTorch's XPU build registers one), and how
// many devices it counts.
TorchXpu detect_torch_xpu();

// LibTorch's XPU caching allocator on `torch_index`: its figures, a new peak, its cache given
// back. Status(not_supported) with the reason where this LibTorch cannot say (before 2.13, or
// its accelerator is not XPU); what LibTorch throws comes out as an exception.
Result<AllocatorFigures> xpu_allocator_figures(int torch_index);
Status xpu_reset_peak_stats(int torch_index);
Status xpu_empty_cache();

Status apply_xpu_plan(const PrecisionPlan& plan);
std::vector<AppliedValue> read_back_xpu();

}  // namespace accelkit::xpu
