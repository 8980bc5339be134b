// Small text helpers the core's sources share.
#pragma once

#include <ios>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace accelkit::text {

// "1.13.1" -> "1.13" (a version's major.minor; the text itself when it has no dot).
inline std::string major_minor(const std::string& version) {
  const auto first = version.find('.');
  return first == std::string::npos ? version : version.substr(0, version.find('.', first + 1));
}

// "7.25 ms", "148.3 ms": two decimals below 10 ms, one above.
inline std::string ms_text(double ms) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(ms < 10 ? 2 : 1);
  s << ms << " ms";
  return s.str();
}

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

// The line of a LibTorch error message that says what went wrong: TorchScript's interpreter
// puts it last ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x31 and 32x32)"
// after a traceback), c10::Error first (before its C++ backtrace). Shortened to `max`.
inline std::string torch_error_line(const std::string& what, std::size_t max = 300) {
  std::string line;
  if (const auto at = what.rfind("Error: "); at != std::string::npos && what.find("TorchScript") != std::string::npos) {
    const auto begin = what.rfind('\n', at);
    line = what.substr(begin == std::string::npos ? 0 : begin + 1);
    line = line.substr(0, line.find('\n'));
  } else {
    line = what.substr(0, what.find('\n'));
  }
  if (auto pos = line.find(" (Triggered internally"); pos != std::string::npos) line.resize(pos);
  while (!line.empty() && line.front() == ' ') line.erase(0, 1);
  return shorten(line, max);
}

}  // namespace accelkit::text
