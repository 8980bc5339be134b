#include "accelkit/pci.hpp"

#include <algorithm>

#include "accelkit/sdk/host_paths.hpp"
#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit {

std::vector<PciGpu> scan_pci_gpus(std::vector<std::string>* problems) {
  std::vector<PciGpu> out;
  const std::string root = sysfs_path("bus/pci/devices");
  auto hex = [&](const std::string& path) -> std::optional<std::uint32_t> {
    const host::ReadResult r = host::read_file(path);
    if (auto why = host::refusal(path, r); !why.empty() && problems) problems->push_back(why);
    return r.ok() ? host::parse_hex32(host::first_line(r.text)) : std::nullopt;
  };
  for (const std::string& address : host::list_dir(root)) {
    const std::string dir = root + "/" + address;
    auto vendor = hex(dir + "/vendor");
    auto pci_class = hex(dir + "/class");
    if (!vendor || !pci_class) continue;
    PciGpu gpu;
    gpu.address = address;
    gpu.vendor = *vendor;
    gpu.pci_class = *pci_class;
    gpu.device = host::read_hex32(dir + "/device").value_or(0);
    const bool display = (gpu.pci_class >> 16) == 0x03;
    const bool known_vendor = gpu.vendor == 0x10de || gpu.vendor == 0x1002;
    if (display && known_vendor) out.push_back(gpu);
  }
  std::sort(out.begin(), out.end(), [](const PciGpu& a, const PciGpu& b) { return a.address < b.address; });
  return out;
}

}  // namespace accelkit
