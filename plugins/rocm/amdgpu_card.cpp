#include "amdgpu_card.hpp"

#include <sstream>

#include <accelkit/sdk/host_paths.hpp>

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::rocm {
namespace {

std::string pci_slot_from_uevent(const std::string& device_dir) {
  auto file = host::read_file(device_dir + "/uevent");
  if (!file.ok()) return {};
  std::istringstream in(file.text);
  for (std::string line; std::getline(in, line);)
    if (host::starts_with(line, "PCI_SLOT_NAME=")) return host::trim(line.substr(14));
  return {};
}

}  // namespace

std::optional<AmdgpuCard> read_amdgpu_card(const std::string& card, const std::string& device_dir) {
  if (host::read_hex32(device_dir + "/vendor").value_or(0) != 0x1002) return std::nullopt;
  AmdgpuCard c;
  c.card = card;
  c.device_dir = device_dir;
  c.pci_address = pci_slot_from_uevent(device_dir);
  c.device_id = host::read_hex32(device_dir + "/device").value_or(0);
  c.revision = host::read_hex32(device_dir + "/revision").value_or(0);
  c.product_name = host::read_line(device_dir + "/product_name").value_or("");
  const VramReading vram = read_vram(c);
  c.vram_total_bytes = vram.total.value_or(0);
  c.has_vram_used = vram.used.has_value();
  c.has_busy_percent = host::read_int(device_dir + "/gpu_busy_percent").has_value();
  c.has_sclk = host::exists(device_dir + "/pp_dpm_sclk");
  for (const std::string& name : host::list_dir(device_dir + "/drm"))
    if (host::starts_with(name, "renderD"))
      if (auto minor = host::parse_int(name.substr(7))) c.render_minor = static_cast<int>(*minor);
  for (const std::string& name : host::list_dir(device_dir + "/hwmon")) {
    if (!host::starts_with(name, "hwmon")) continue;
    c.hwmon_dir = device_dir + "/hwmon/" + name;
    break;
  }
  if (!c.hwmon_dir.empty()) {
    c.has_temperature = host::exists(c.hwmon_dir + "/temp1_input");
    // Kernels differ: power1_average (older, and dGPUs before 6.x) or power1_input.
    for (const char* f : {"power1_average", "power1_input"})
      if (host::exists(c.hwmon_dir + "/" + f)) {
        c.power_file = f;
        break;
      }
  }
  return c;
}

VramReading read_vram(const AmdgpuCard& card) {
  VramReading v;
  v.total_path = card.device_dir + "/mem_info_vram_total";
  v.used_path = card.device_dir + "/mem_info_vram_used";
  auto bytes = [](const std::string& path) -> std::optional<std::uint64_t> {
    const auto n = host::read_int(path);
    return n && *n >= 0 ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(*n)) : std::nullopt;
  };
  v.total = bytes(v.total_path);
  v.used = bytes(v.used_path);
  return v;
}

std::vector<AmdgpuCard> find_amdgpu_cards(std::vector<std::string>* problems) {
  std::vector<AmdgpuCard> out;
  const std::string drm = sysfs_path("class/drm");
  for (const std::string& name : host::list_dir(drm)) {
    if (!host::is_drm_card(name)) continue;
    const std::string vendor = drm + "/" + name + "/device/vendor";
    if (auto why = host::refusal(vendor, host::read_file(vendor)); !why.empty() && problems) problems->push_back(why);
    if (auto c = read_amdgpu_card(name, drm + "/" + name + "/device")) out.push_back(std::move(*c));
  }
  return out;
}

}  // namespace accelkit::rocm
