// AMD GPU architecture: the KFD gfx_target_version and the family it belongs to.
//
// KFD encodes the target as major * 10000 + minor * 100 + stepping, and the ISA name spells
// the stepping in hex: 90010 = gfx90a, 90402 = gfx942, 100100 = gfx1010, 110000 = gfx1100.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace accelkit::rocm {

enum class ArchFamily { gcn5, cdna1, cdna2, cdna3, cdna4, rdna1, rdna2, rdna3, rdna3_5, rdna4, unknown };

const char* to_string(ArchFamily f) noexcept;  // "CDNA2", "RDNA1", ..., "unknown"

struct GfxTarget {
  unsigned major = 0;
  unsigned minor = 0;
  unsigned stepping = 0;

  std::string name() const;  // "gfx90a"
  ArchFamily family() const noexcept;
  bool operator==(const GfxTarget& o) const noexcept {
    return major == o.major && minor == o.minor && stepping == o.stepping;
  }
};

// From KFD's gfx_target_version; nullopt for 0 (a CPU node) or a value out of range.
std::optional<GfxTarget> decode_gfx_target_version(std::int64_t value);
// From an ISA name ("gfx90a", "gfx1100"); nullopt when it is not one.
std::optional<GfxTarget> parse_gfx_name(std::string_view name);

}  // namespace accelkit::rocm
