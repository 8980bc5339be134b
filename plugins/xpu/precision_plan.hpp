// The xpu plugin's precision plan: a pure function of the request and the architecture rules.
#pragma once

#include <string>

#include <accelkit/sdk/precision.hpp>

#include "arch_rules.hpp"

namespace accelkit::xpu {

Result<PrecisionPlan> plan_xpu_precision(const PrecisionRequest& request, const XpuRules& rules,
                                         const std::string& device_name);

}  // namespace accelkit::xpu
