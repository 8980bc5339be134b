#include "cpuinfo.hpp"

#include <set>
#include <utility>

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::cpu {

CpuinfoSummary parse_cpuinfo(std::string_view text) {
  CpuinfoSummary out;
  std::set<std::pair<std::string, std::string>> cores;
  std::set<std::string> sockets;
  std::string physical_id, core_id;
  auto end_block = [&] {
    if (!physical_id.empty() && !core_id.empty()) cores.emplace(physical_id, core_id);
    if (!physical_id.empty()) sockets.insert(physical_id);
    physical_id.clear();
    core_id.clear();
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    auto colon = line.find(':');
    if (colon == std::string_view::npos) {
      if (host::trim(line).empty()) end_block();
      continue;
    }
    std::string key = host::trim(line.substr(0, colon));
    std::string value = host::trim(line.substr(colon + 1));
    if (key == "processor") {
      end_block();
      ++out.logical_cores;
    } else if (key == "vendor_id" && out.vendor_id.empty()) {
      out.vendor_id = value;
    } else if (key == "model name" && out.model_name.empty()) {
      out.model_name = value;
    } else if (key == "physical id") {
      physical_id = value;
    } else if (key == "core id") {
      core_id = value;
    }
  }
  end_block();
  out.physical_cores = static_cast<int>(cores.size());
  out.sockets = static_cast<int>(sockets.size());
  return out;
}

std::string vendor_name(std::string_view id) {
  if (id == "GenuineIntel") return "Intel";
  if (id == "AuthenticAMD") return "AMD";
  if (id == "HygonGenuine") return "Hygon";
  if (id == "CentaurHauls") return "Centaur";
  if (host::trim(id) == "Shanghai") return "Zhaoxin";
  return std::string(id);
}

}  // namespace accelkit::cpu
