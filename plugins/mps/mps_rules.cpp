#include "mps_rules.hpp"

#include <cctype>

namespace accelkit::mps {

const char* to_string(ChipFamily f) noexcept {
  switch (f) {
    case ChipFamily::m1: return "M1";
    case ChipFamily::m2: return "M2";
    case ChipFamily::m3: return "M3";
    case ChipFamily::m4: return "M4";
    case ChipFamily::m5_or_newer: return "M5+";
    case ChipFamily::intel: return "Intel";
    case ChipFamily::unknown: return "unknown";
  }
  return "unknown";
}

std::optional<Version> parse_version(std::string_view text) {
  Version v;
  std::size_t i = 0;
  auto number = [&](int& out) {
    const std::size_t start = i;
    out = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && i - start < 6)
      out = out * 10 + (text[i++] - '0');
    return i > start;
  };
  if (!number(v.major)) return std::nullopt;
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!number(v.minor)) return std::nullopt;
  }
  return v;
}

ChipFamily chip_family(std::string_view brand) {
  if (brand.find("Intel") != std::string_view::npos) return ChipFamily::intel;
  const auto at = brand.find("Apple M");
  if (at == std::string_view::npos) return ChipFamily::unknown;
  int generation = 0;
  for (std::size_t i = at + 7; i < brand.size() && std::isdigit(static_cast<unsigned char>(brand[i])); ++i)
    generation = generation * 10 + (brand[i] - '0');
  switch (generation) {
    case 0: return ChipFamily::unknown;
    case 1: return ChipFamily::m1;
    case 2: return ChipFamily::m2;
    case 3: return ChipFamily::m3;
    case 4: return ChipFamily::m4;
    default: return ChipFamily::m5_or_newer;
  }
}

MpsCapabilities mps_capabilities(const MpsProbeValues& v) {
  MpsCapabilities c;
  c.chip = chip_family(v.brand);
  const std::string chip = v.brand.empty() ? std::string("this Mac") : v.brand;
  const auto os = parse_version(v.os_version);
  const std::string torch = std::to_string(v.torch.major) + "." + std::to_string(v.torch.minor);
  c.usable = v.mps_available;
  if (!c.usable) {
    c.reasons.push_back("MPS not available to LibTorch " + torch +
                        " (needs macOS 12.3+ and a LibTorch built with MPS)");
    return c;
  }
  c.fp16 = true;
  c.autocast = v.torch.at_least(2, 5);
  const bool os14 = os && os->at_least(14, 0);
  const bool apple_gpu_bf16 = c.chip != ChipFamily::m1 && c.chip != ChipFamily::intel && c.chip != ChipFamily::unknown;
  c.bf16 = os14 && apple_gpu_bf16 && v.torch.at_least(2, 6);
  if (c.autocast) {
    c.dtype = "fp16";
    c.reasons.push_back("fp16 autocast with loss scaling: MPS autocast exists in LibTorch " + torch);
  } else {
    c.reasons.push_back("fp32: LibTorch " + torch + " has no MPS autocast (from 2.5)");
  }
  if (c.bf16) {
    c.reasons.push_back("bf16 offered: " + chip + " on macOS " + v.os_version + " with LibTorch " + torch);
  } else if (!os14) {
    c.reasons.push_back("no bf16: MPS needs macOS 14 or newer for bf16 (this is " +
                        (v.os_version.empty() ? std::string("unknown") : v.os_version) + ")");
  } else if (!apple_gpu_bf16) {
    c.reasons.push_back(std::string("no bf16: ") + to_string(c.chip) + " GPUs have no bf16 arithmetic");
  } else {
    c.reasons.push_back("no bf16: MPS bf16 autocast needs LibTorch 2.6 or newer (this is " + torch + ")");
  }
  c.fused_adamw = v.torch.at_least(2, 4);
  c.reasons.push_back(c.fused_adamw ? "fused AdamW: LibTorch " + torch + " has MPS kernels for it"
                                    : "no fused AdamW: MPS kernels arrived in LibTorch 2.4 (this is " + torch + ")");
  return c;
}

}  // namespace accelkit::mps
