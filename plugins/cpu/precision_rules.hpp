// The CPU precision rules as a pure function (no LibTorch), so they are tested directly:
// auto -> bf16 autocast with AVX512_BF16 or AMX-BF16, else fp32; fp16 and TF32 "on" are
// refused; threads = physical cores unless requested.
#pragma once

#include <accelkit/sdk/precision.hpp>

#include "probe.hpp"

namespace accelkit::cpu {

Result<PrecisionPlan> plan_cpu_precision(const PrecisionRequest& request, const CpuProbe& probe);

}  // namespace accelkit::cpu
