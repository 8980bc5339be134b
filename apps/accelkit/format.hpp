// Small text helpers shared by the verbs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "accelkit/capability.hpp"
#include "accelkit/precision.hpp"
#include "accelkit/settings.hpp"

namespace accelkit::cli {

std::string join(const std::vector<std::string>& parts, const std::string& sep);
std::string human_bytes(std::uint64_t bytes);  // "7.6 GiB"; "-" for 0 (unknown)
std::string or_dash(const std::string& s);
// Typed names, then "key=value" extras.
std::vector<std::string> capability_names(const CapabilitySet& caps);

// The precision request the settings ask for (precision, tf32, threads).
PrecisionRequest precision_request_from(const Settings& settings);

// The value `report --apply` intended for a read-back key, or nullopt when the key is not
// one the plan decides.
std::optional<std::string> intended_value(const std::string& key, const PrecisionPlan& plan);
// Whether a read-back value equals the intended one (booleans, dtype spellings normalised).
bool same_value(const std::string& key, const std::string& intended, const std::string& read);

}  // namespace accelkit::cli
