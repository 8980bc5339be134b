// amdgpu cards as the DRM class shows them (sysfs class/drm/card<N>/device, vendor 0x1002),
// with the sensor files the monitor reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accelkit::rocm {

struct AmdgpuCard {
  std::string card;          // "card0"
  std::string device_dir;    // sysfs_path("class/drm/card0/device")
  std::string pci_address;   // "0000:03:00.0" from uevent PCI_SLOT_NAME; "" = unknown
  std::uint32_t device_id = 0;
  std::uint32_t revision = 0;
  std::string product_name;  // device/product_name where the board has one; "" otherwise
  std::uint64_t vram_total_bytes = 0;  // mem_info_vram_total; 0 = unknown
  int render_minor = -1;     // from device/drm/renderD<N>; -1 = none
  std::string hwmon_dir;     // device/hwmon/hwmon<N>; "" = none
  // Which sensors exist (the monitor reads them on each sample).
  bool has_temperature = false;   // hwmon temp1_input
  std::string power_file;         // "power1_average" or "power1_input"; "" = none
  bool has_busy_percent = false;  // gpu_busy_percent
  bool has_vram_used = false;     // mem_info_vram_used
  bool has_sclk = false;          // pp_dpm_sclk
};

// Every card0..N whose device/vendor is 0x1002 (connector entries like card0-DP-1 skipped).
// Every amdgpu card under class/drm; a card whose vendor file exists but cannot be read is
// skipped, and said in `problems` when given.
std::vector<AmdgpuCard> find_amdgpu_cards(std::vector<std::string>* problems = nullptr);

// Reads one card's device directory.
std::optional<AmdgpuCard> read_amdgpu_card(const std::string& card, const std::string& device_dir);

// The card's VRAM now, read from its device directory on each call (what the monitor samples and
// Device::memory() reports): mem_info_vram_total and mem_info_vram_used in bytes, for the whole
// card and every process on it. A file that cannot be read, or holds no byte count, leaves its
// field nullopt.
struct VramReading {
  std::string total_path;  // <device_dir>/mem_info_vram_total
  std::string used_path;   // <device_dir>/mem_info_vram_used
  std::optional<std::uint64_t> total;
  std::optional<std::uint64_t> used;
};
VramReading read_vram(const AmdgpuCard& card);

}  // namespace accelkit::rocm
