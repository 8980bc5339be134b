// Small text helpers the core's sources share.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace accelkit::text {

// "a, b, c" (with sep ", ").
inline std::string join(const std::vector<std::string>& parts, std::string_view sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

}  // namespace accelkit::text
