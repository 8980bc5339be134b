#include "meminfo.hpp"

#include <cstdlib>
#include <map>
#include <string>

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::cpu {

MemInfo parse_meminfo(std::string_view text) {
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
    char* end = nullptr;
    unsigned long long v = std::strtoull(value.c_str(), &end, 10);
    if (end == value.c_str()) continue;
    std::string_view unit = host::trim(std::string_view(end));
    std::uint64_t mult = unit == "kB" ? 1024 : 1;  // every size line is kB; counts have no unit
    kb[host::trim(line.substr(0, colon))] = v * mult;
  }
  MemInfo out;
  if (auto it = kb.find("MemTotal"); it != kb.end()) out.total_bytes = it->second;
  if (auto it = kb.find("MemAvailable"); it != kb.end()) {
    out.available_bytes = it->second;
  } else if (kb.count("MemFree")) {
    out.available_bytes = kb["MemFree"] + kb["Buffers"] + kb["Cached"];
  }
  return out;
}

}  // namespace accelkit::cpu
