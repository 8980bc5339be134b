// Intel GPUs as the DRM class shows them (sysfs class/drm/card<N>/device, vendor 0x8086) on
// the i915 or xe kernel driver, with the files the monitor and the memory figures read.
// Torch-free; paths through sysfs_path(), so the tests point them at fixture trees.
//
// Files (Linux's Documentation/ABI/testing/sysfs-driver-intel-i915-hwmon and
// sysfs-driver-intel-xe-hwmon for the hwmon ones):
//   device/uevent                      DRIVER= (i915, xe) and PCI_SLOT_NAME=
//   device/hwmon/hwmon<N>/             name "i915" or "xe"; energy1_input (uJ, card), power1_max
//                                      (uW, PL1; 0 = no limit), temp<N>_input (m°C, xe only)
//   i915: card<N>/lmem_total_bytes, lmem_avail_bytes (the i915 backports shipped for Arc and
//         Data Center GPUs; upstream i915 has no VRAM file), card<N>/gt_act_freq_mhz,
//         gt_max_freq_mhz, card<N>/gt/gt<K> (one per tile)
//   xe:   device/tile<K>/physical_vram_size_bytes, device/tile<K>/gt<G>/freq0/act_freq, max_freq
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accelkit::xpu {

struct IntelCard {
  std::string card;         // "card0"
  std::string card_dir;     // sysfs_path("class/drm/card0")
  std::string device_dir;   // card_dir + "/device"
  std::string driver;       // "i915" or "xe"
  std::string pci_address;  // "0000:03:00.0" from uevent PCI_SLOT_NAME; "" = unknown
  std::uint32_t device_id = 0;
  std::uint32_t revision = 0;
  int render_minor = -1;    // device/drm/renderD<N>; -1 = none
  int tiles = 0;            // xe tile<K> or i915 gt/gt<K> directories; 0 = none listed
  // Local memory (VRAM) the driver reports, summed over tiles; nullopt when it reports none
  // (an integrated GPU, or upstream i915), and vram_source says which files gave it.
  std::optional<std::uint64_t> vram_bytes;
  std::string vram_source;
  std::string hwmon_dir;    // "" = no hwmon registered by the driver
  std::string energy_file;  // "energy1_input" when present
  std::string temp_file;    // the first temp<N>_input present (xe); "" = none
  std::string power_limit_file;  // "power1_max" when present
  std::string freq_file;    // the actual-frequency file of the first tile/GT; "" = none
  std::string freq_max_file;
};

// Every card<N> (connector entries like card0-DP-1 skipped) whose device/vendor is 0x8086 and
// whose driver is i915 or xe. A card on another driver (vfio-pci, say) is skipped and said in
// `notes`; an unreadable vendor file or a malformed value is said in `problems`.
std::vector<IntelCard> find_intel_cards(std::vector<std::string>* notes = nullptr,
                                        std::vector<std::string>* problems = nullptr);

// One card's directory; nullopt when it is not an Intel GPU on i915/xe (`why` says so).
std::optional<IntelCard> read_intel_card(const std::string& card, const std::string& card_dir, std::string* why,
                                         std::vector<std::string>* problems);

// The local memory the driver reports now: total, and free where i915's lmem_avail_bytes
// exists. A file holding anything but a byte count is refused (nullopt, said in `problem`).
struct LmemReading {
  std::optional<std::uint64_t> total;
  std::optional<std::uint64_t> available;
  std::string source;
  std::string problem;
};
LmemReading read_lmem(const IntelCard& card);

}  // namespace accelkit::xpu
