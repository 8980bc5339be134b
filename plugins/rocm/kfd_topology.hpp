// The KFD topology (sysfs class/kfd/kfd/topology/nodes/<N>/properties): one node per CPU
// socket and per GPU, in the order the HSA runtime enumerates agents.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gfx_target.hpp"

namespace accelkit::rocm {

struct KfdNode {
  int node = -1;                   // the directory name
  std::map<std::string, std::int64_t> properties;  // every "key value" line
  std::optional<GfxTarget> gfx;    // nullopt for CPU nodes
  std::int64_t simd_count = 0;
  std::int64_t cpu_cores_count = 0;
  std::int64_t drm_render_minor = -1;  // -1 = not given
  std::string pci_address;         // "0000:03:00.0" from domain + location_id; "" = unknown

  bool is_gpu() const noexcept { return gfx.has_value() && simd_count > 0; }
  // A GPU node that also has CPU cores: an APU.
  bool is_apu() const noexcept { return is_gpu() && cpu_cores_count > 0; }
};

// Parses one properties file ("key value" per line).
KfdNode parse_kfd_properties(std::string_view text, int node);

struct KfdTopology {
  bool present = false;        // the topology directory exists (amdgpu with KFD is loaded)
  std::vector<KfdNode> nodes;  // every node, by node number
  std::vector<KfdNode> gpus() const;
};

// Reads sysfs_path("class/kfd/kfd/topology/nodes").
KfdTopology read_kfd_topology();

}  // namespace accelkit::rocm
