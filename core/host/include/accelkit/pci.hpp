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

// Display-class devices of vendors accelkit has plugins for (NVIDIA, AMD). A device file that
// exists but cannot be read (not a regular file, permission) is skipped, and said in
// `problems` ("cannot read .../vendor: not a regular file (a FIFO)") when given.
std::vector<PciGpu> scan_pci_gpus(std::vector<std::string>* problems = nullptr);

}  // namespace accelkit
