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

namespace accelkit::text {

// `s` for a one-line message: at most `max` characters (a longer text is cut, its length
// said), control characters shown as '?'. Input from files and the environment can be
// megabytes of anything; a message quotes only what helps.
inline std::string shorten(std::string_view s, std::size_t max = 60) {
  std::string out;
  const std::size_t n = s.size() > max ? max : s.size();
  out.reserve(n + 24);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
  }
  if (s.size() > max) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace accelkit::text
