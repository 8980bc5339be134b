// What the PCI bus shows, read from sysfs (ACCELKIT_SYSFS_ROOT honoured): used to hint
// "there is a GPU here that no usable plugin covers".
#pragma once

#include <string>
#include <vector>

namespace accelkit {

struct PciGpu {
  std::string address;    // "0000:01:00.0"
  unsigned vendor = 0;    // 0x10de NVIDIA, 0x1002 AMD
  unsigned device = 0;
  unsigned pci_class = 0; // 0x030000 VGA, 0x030200 3D, 0x038000 display
};

// Display-class devices of vendors accelkit has plugins for (NVIDIA, AMD).
std::vector<PciGpu> scan_pci_gpus();

}  // namespace accelkit
