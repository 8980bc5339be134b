// sysfs CPU topology and NUMA nodes (devices/system/cpu, devices/system/node).
#pragma once

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::cpu {

struct SysfsTopology {
  int logical_cores = 0;   // cpuN directories with a topology/ (offline CPUs have none)
  int physical_cores = 0;  // distinct (physical_package_id, core_id)
  int sockets = 0;         // distinct physical_package_id
};

SysfsTopology read_sysfs_topology(const host::FileReader& read);

// node<N> directories under devices/system/node; 0 when the kernel shows none.
int count_numa_nodes();

}  // namespace accelkit::cpu
