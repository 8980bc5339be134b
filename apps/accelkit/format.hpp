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
// A rate in a unit that shows it: `tflops` TFLOP/s as "1.25 TFLOP/s", "420 GFLOP/s",
// "4.56 GFLOP/s", "812 MFLOP/s" (three significant digits below 1 TFLOP/s; never "0.00").
std::string flop_rate(double tflops);
// Typed names, then "key=value" extras.
std::vector<std::string> capability_names(const CapabilitySet& caps);

}  // namespace accelkit::cli
