// Per-card training presets (batch size, gradient accumulation, model width) from a TOML data
// file, presets.toml, which the build compiles into the plugin.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace accelkit::rocm {

struct Preset {
  std::string name;        // the VRAM class ("12GB"), plus the device entry when one applied
  std::int64_t batch_size = 0;
  std::int64_t grad_accumulation = 1;
  std::int64_t model_width = 0;
  std::string why;         // "16 GiB VRAM -> class 12GB; gfx101* entry"
};

struct PresetClass {
  std::string name;
  std::optional<double> max_vram_gib;  // nullopt = no upper bound
  std::int64_t batch_size = 0, grad_accumulation = 1, model_width = 0;
};

struct PresetDevice {
  std::string name;                      // for display; may be ""
  std::optional<std::uint32_t> pci_device_id;
  std::string gfx;                       // "gfx1010" or a prefix "gfx101*"
  std::optional<std::int64_t> batch_size, grad_accumulation, model_width;
};

struct PresetTable {
  std::vector<PresetClass> classes;
  std::vector<PresetDevice> devices;
};

class PresetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses and validates the data; throws PresetError with "<source>:line:column: ...".
PresetTable parse_presets(std::string_view toml_text, const std::string& source);

// The built-in table (presets.toml as compiled in).
std::string_view builtin_presets_text();

// The preset for a card; nullopt when no class matches (an empty table).
std::optional<Preset> select_preset(const PresetTable& table, std::uint64_t vram_bytes,
                                    std::uint32_t pci_device_id, const std::string& gfx);

}  // namespace accelkit::rocm
