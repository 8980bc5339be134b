#include "accelkit/pci.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "accelkit/host_paths.hpp"

namespace fs = std::filesystem;

namespace accelkit {

namespace {
bool read_hex(const fs::path& file, unsigned& out) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text)) return false;
  try {
    out = static_cast<unsigned>(std::stoul(text, nullptr, 16));
  } catch (const std::exception&) {
    return false;
  }
  return true;
}
}  // namespace

std::vector<PciGpu> scan_pci_gpus() {
  std::vector<PciGpu> out;
  std::error_code ec;
  fs::path root = sysfs_path("bus/pci/devices");
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    PciGpu gpu;
    gpu.address = entry.path().filename().string();
    if (!read_hex(entry.path() / "vendor", gpu.vendor) || !read_hex(entry.path() / "class", gpu.pci_class)) continue;
    read_hex(entry.path() / "device", gpu.device);
    bool display = (gpu.pci_class >> 16) == 0x03;
    bool known_vendor = gpu.vendor == 0x10de || gpu.vendor == 0x1002;
    if (display && known_vendor) out.push_back(gpu);
  }
  std::sort(out.begin(), out.end(), [](const PciGpu& a, const PciGpu& b) { return a.address < b.address; });
  return out;
}

}  // namespace accelkit
