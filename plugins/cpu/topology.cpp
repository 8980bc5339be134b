#include "topology.hpp"

#include <cctype>
#include <set>
#include <string>
#include <utility>

#include <accelkit/sdk/host_paths.hpp>

namespace accelkit::cpu {
namespace {
// "cpu12" with prefix "cpu" -> true; "cpufreq", "cpuidle" -> false.
bool numbered(const std::string& name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  for (std::size_t i = prefix.size(); i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}
}  // namespace

SysfsTopology read_sysfs_topology(const host::FileReader& read) {
  SysfsTopology out;
  const std::string root = sysfs_path("devices/system/cpu");
  std::set<std::pair<long long, long long>> cores;
  std::set<long long> packages;
  for (const std::string& name : host::list_dir(root)) {
    if (!numbered(name, "cpu")) continue;
    const std::string topo = root + "/" + name + "/topology/";
    auto core = host::read_int(read, topo + "core_id");
    if (!core) continue;
    auto package = host::read_int(read, topo + "physical_package_id").value_or(0);
    ++out.logical_cores;
    cores.emplace(package, *core);
    packages.insert(package);
  }
  out.physical_cores = static_cast<int>(cores.size());
  out.sockets = static_cast<int>(packages.size());
  return out;
}

int count_numa_nodes() {
  int n = 0;
  for (const std::string& name : host::list_dir(sysfs_path("devices/system/node")))
    if (numbered(name, "node")) ++n;
  return n;
}

}  // namespace accelkit::cpu
