// The precision plan for an AMD GPU: the architecture rules applied to the user's request.
// Pure; an explicit request the architecture cannot honour is refused, never downgraded.
#pragma once

#include <accelkit/sdk/precision.hpp>

#include "arch_rules.hpp"

namespace accelkit::rocm {

Result<PrecisionPlan> plan_rocm_precision(const PrecisionRequest& request, const ArchRules& rules,
                                          const std::string& device_name);

}  // namespace accelkit::rocm
