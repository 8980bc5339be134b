#include "gfx_target.hpp"

namespace accelkit::rocm {

const char* to_string(ArchFamily f) noexcept {
  switch (f) {
    case ArchFamily::gcn5: return "GCN5";
    case ArchFamily::cdna1: return "CDNA1";
    case ArchFamily::cdna2: return "CDNA2";
    case ArchFamily::cdna3: return "CDNA3";
    case ArchFamily::cdna4: return "CDNA4";
    case ArchFamily::rdna1: return "RDNA1";
    case ArchFamily::rdna2: return "RDNA2";
    case ArchFamily::rdna3: return "RDNA3";
    case ArchFamily::rdna3_5: return "RDNA3.5";
    case ArchFamily::rdna4: return "RDNA4";
    case ArchFamily::unknown: return "unknown";
  }
  return "unknown";
}

std::string GfxTarget::name() const {
  static const char* hex = "0123456789abcdef";
  std::string out = "gfx" + std::to_string(major) + std::to_string(minor);
  if (stepping < 16) out += hex[stepping];
  else out += std::to_string(stepping);
  return out;
}

ArchFamily GfxTarget::family() const noexcept {
  switch (major) {
    case 9:
      if (minor == 0 && stepping == 0x8) return ArchFamily::cdna1;                 // gfx908 MI100
      if (minor == 0 && stepping == 0xa) return ArchFamily::cdna2;                 // gfx90a MI200
      if (minor == 0 && (stepping == 0x0 || stepping == 0x6)) return ArchFamily::gcn5;  // Vega
      if (minor == 4) return ArchFamily::cdna3;                                    // gfx94x MI300
      if (minor == 5) return ArchFamily::cdna4;                                    // gfx950 MI350
      return ArchFamily::unknown;
    case 10:
      if (minor == 1) return ArchFamily::rdna1;  // gfx101x Navi 1x
      if (minor == 3) return ArchFamily::rdna2;  // gfx103x Navi 2x
      return ArchFamily::unknown;
    case 11:
      if (minor == 0) return ArchFamily::rdna3;    // gfx110x Navi 3x
      if (minor == 5) return ArchFamily::rdna3_5;  // gfx115x Strix
      return ArchFamily::unknown;
    case 12:
      return ArchFamily::rdna4;  // gfx120x Navi 4x
    default:
      return ArchFamily::unknown;
  }
}

std::optional<GfxTarget> decode_gfx_target_version(std::int64_t value) {
  if (value <= 0 || value > 999999) return std::nullopt;
  const auto v = static_cast<unsigned>(value);
  return GfxTarget{v / 10000, (v / 100) % 100, v % 100};
}

std::optional<GfxTarget> parse_gfx_name(std::string_view name) {
  if (name.substr(0, 3) != "gfx") return std::nullopt;
  std::string_view digits = name.substr(3);
  // The last character is the hex stepping, the one before it the minor, the rest the major.
  if (digits.size() < 3 || digits.size() > 4) return std::nullopt;
  auto hex_value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  GfxTarget t;
  for (char c : digits.substr(0, digits.size() - 2)) {
    if (c < '0' || c > '9') return std::nullopt;
    t.major = t.major * 10 + static_cast<unsigned>(c - '0');
  }
  const char minor = digits[digits.size() - 2];
  const int stepping = hex_value(digits.back());
  if (minor < '0' || minor > '9' || stepping < 0 || t.major == 0) return std::nullopt;
  t.minor = static_cast<unsigned>(minor - '0');
  t.stepping = static_cast<unsigned>(stepping);
  return t;
}

}  // namespace accelkit::rocm
