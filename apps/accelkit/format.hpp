// Small text helpers shared by the verbs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "accelkit/sdk/capability.hpp"
#include "accelkit/sdk/precision.hpp"
#include "accelkit/settings.hpp"

namespace accelkit::cli {

std::string join(const std::vector<std::string>& parts, const std::string& sep);
std::string human_bytes(std::uint64_t bytes);  // "7.6 GiB"; "-" for 0 (unknown)
std::string or_dash(const std::string& s);
// `v` with `digits` decimals ("3.14").
std::string fixed(double v, int digits);
// Typed names, then "key=value" extras.
std::vector<std::string> capability_names(const CapabilitySet& caps);

// The value `report --apply` intended for a read-back value (by its PlanField), or nullopt
// when it shows nothing the plan decides.
std::optional<std::string> intended_value(const AppliedValue& read, const PrecisionPlan& plan);
// Whether a read-back value equals the intended one (booleans, dtype spellings normalised).
bool same_value(const std::string& intended, const std::string& read);

}  // namespace accelkit::cli
