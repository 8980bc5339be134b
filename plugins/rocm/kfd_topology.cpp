#include "kfd_topology.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <accelkit/sdk/host_paths.hpp>

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::rocm {

KfdNode parse_kfd_properties(std::string_view text, int node) {
  KfdNode n;
  n.node = node;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key, value;
    if (!(fields >> key >> value)) continue;
    if (auto v = host::parse_int(value)) n.properties[key] = *v;
  }
  auto get = [&](const char* key) -> std::optional<std::int64_t> {
    auto it = n.properties.find(key);
    return it == n.properties.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
  };
  if (auto v = get("gfx_target_version")) n.gfx = decode_gfx_target_version(*v);
  n.simd_count = get("simd_count").value_or(0);
  n.cpu_cores_count = get("cpu_cores_count").value_or(0);
  n.drm_render_minor = get("drm_render_minor").value_or(-1);
  if (auto loc = get("location_id"); loc && *loc > 0) {
    // location_id is the PCI bus/device/function: bus << 8 | device << 3 | function.
    const auto l = static_cast<unsigned>(*loc);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", static_cast<unsigned>(get("domain").value_or(0)),
                  (l >> 8) & 0xff, (l >> 3) & 0x1f, l & 0x7);
    n.pci_address = buf;
  }
  return n;
}

std::vector<KfdNode> KfdTopology::gpus() const {
  std::vector<KfdNode> out;
  for (const auto& n : nodes)
    if (n.is_gpu()) out.push_back(n);
  return out;
}

KfdTopology read_kfd_topology() {
  KfdTopology t;
  const std::string dir = sysfs_path("class/kfd/kfd/topology/nodes");
  t.present = host::exists(dir);
  for (const std::string& name : host::list_dir(dir)) {
    auto id = host::parse_int(name);
    if (!id) continue;
    auto file = host::read_file(dir + "/" + name + "/properties");
    if (!file.ok()) continue;
    t.nodes.push_back(parse_kfd_properties(file.text, static_cast<int>(*id)));
  }
  std::sort(t.nodes.begin(), t.nodes.end(), [](const KfdNode& a, const KfdNode& b) { return a.node < b.node; });
  return t;
}

}  // namespace accelkit::rocm
