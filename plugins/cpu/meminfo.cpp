#include "meminfo.hpp"

#include <cerrno>
#include <cstdlib>
#include <map>
#include <string>

#include "accelkit/sdk/support/host_file.hpp"
#include "accelkit/sdk/support/plausible.hpp"

namespace accelkit::cpu {

std::map<std::string, std::uint64_t> parse_kb_lines(std::string_view text, std::string& implausible) {
  std::map<std::string, std::uint64_t> kb;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string value = host::trim(line.substr(colon + 1));  // "24682416 kB"
    errno = 0;
    char* end = nullptr;
    unsigned long long v = std::strtoull(value.c_str(), &end, 10);
    if (end == value.c_str() || value.front() == '-') continue;
    const std::string key = host::trim(line.substr(0, colon));
    std::string_view unit = host::trim(std::string_view(end));
    // Every size line is kB; counts have no unit. A figure that overflows or cannot be memory
    // is left out, and said.
    std::optional<std::uint64_t> bytes =
        errno == ERANGE ? std::nullopt : unit == "kB" ? plausible::kib_to_bytes(v) : plausible::memory_bytes(v);
    if (!bytes) {
      if (implausible.empty()) implausible = "implausible: " + key + " " + value;
      continue;
    }
    kb[key] = *bytes;
  }
  return kb;
}

MemInfo parse_meminfo(std::string_view text) {
  std::string implausible;
  std::map<std::string, std::uint64_t> kb = parse_kb_lines(text, implausible);
  MemInfo out;
  out.implausible = implausible;
  if (auto it = kb.find("MemTotal"); it != kb.end()) out.total_bytes = it->second;
  if (auto it = kb.find("MemAvailable"); it != kb.end()) {
    out.available_bytes = it->second;
  } else if (kb.count("MemFree")) {
    const std::uint64_t sum = kb["MemFree"] + kb["Buffers"] + kb["Cached"];  // each <= 64 TiB: no wrap
    if (plausible::memory_bytes(sum)) out.available_bytes = sum;
  }
  return out;
}

}  // namespace accelkit::cpu
