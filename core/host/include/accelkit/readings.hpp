// What the host does with a plugin's sensor readings before anything shows or uses them.
#pragma once

#include <vector>

#include "accelkit/sdk/monitor.hpp"

namespace accelkit {

// Every reading whose value cannot physically be (outside its unit's range, or not finite:
// sdk/support/plausible.hpp) becomes n/a, its note "implausible: <raw> ..." - whatever the
// plugin reported. Readings of units without a range are only checked for being finite.
void screen_readings(std::vector<Reading>& readings);

}  // namespace accelkit
