#include "arch_rules.hpp"

#include <cstdio>

namespace accelkit::xpu {
namespace {

struct IdRange {
  std::uint32_t first, last;
  XeArch arch;
};

// PCI device ids per architecture (Linux's include/drm/intel/pciids.h and xe_pciids.h list
// the same ids by platform).
constexpr IdRange kIds[] = {
    {0x0bd0, 0x0bdb, XeArch::xe_hpc},  // Data Center GPU Max 1100/1350/1550
    {0x0b69, 0x0b69, XeArch::xe_hpc},
    {0x0b6e, 0x0b6e, XeArch::xe_hpc},
    {0x5690, 0x56bf, XeArch::xe_hpg},  // Arc A-series, Arc Pro A (DG2)
    {0x56c0, 0x56c2, XeArch::xe_hpg},  // Data Center GPU Flex 140/170
    {0xe202, 0xe223, XeArch::xe2_hpg},  // Arc B-series, Arc Pro B (Battlemage)
    {0x6420, 0x6420, XeArch::xe2_lpg},  // Lunar Lake
    {0x64a0, 0x64b0, XeArch::xe2_lpg},
    {0x7d51, 0x7d51, XeArch::xe_lpg_plus},  // Arrow Lake-H
    {0x7dd1, 0x7dd1, XeArch::xe_lpg_plus},
    {0x7d40, 0x7d67, XeArch::xe_lpg},  // Meteor Lake, Arrow Lake-U/S
    {0x7dd5, 0x7dd5, XeArch::xe_lpg},
    {0x9a40, 0x9aff, XeArch::xe_lp},  // Tiger Lake
    {0x4c8a, 0x4c9a, XeArch::xe_lp},  // Rocket Lake
    {0x4680, 0x46ff, XeArch::xe_lp},  // Alder Lake
    {0xa780, 0xa7ff, XeArch::xe_lp},  // Raptor Lake
    {0x4905, 0x4909, XeArch::xe_lp},  // Iris Xe MAX (DG1)
};

std::string id_text(std::uint32_t id) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "8086:%04x", id);
  return buf;
}

}  // namespace

const char* to_string(XeArch arch) {
  switch (arch) {
    case XeArch::xe_lp: return "Xe-LP";
    case XeArch::xe_hpg: return "Xe-HPG";
    case XeArch::xe_hpc: return "Xe-HPC";
    case XeArch::xe_lpg: return "Xe-LPG";
    case XeArch::xe_lpg_plus: return "Xe-LPG+";
    case XeArch::xe2_hpg: return "Xe2-HPG";
    case XeArch::xe2_lpg: return "Xe2-LPG";
    case XeArch::unknown: break;
  }
  return "unknown";
}

XeArch arch_of(std::uint32_t device_id) {
  // Xe-LPG+ ids sit inside the Xe-LPG range: the first match wins, so they come first.
  for (const IdRange& r : kIds)
    if (device_id >= r.first && device_id <= r.last) return r.arch;
  return XeArch::unknown;
}

XpuRules xpu_rules(std::uint32_t device_id) {
  XpuRules r;
  r.arch = arch_of(device_id);
  const std::string arch = to_string(r.arch);
  switch (r.arch) {
    case XeArch::xe_hpc:
      r.xmx = r.bf16 = r.fp16 = r.tf32 = true;
      r.reasons.push_back("bf16: Xe-HPC's XMX engines run bf16 (and fp16, tf32, int8)");
      r.reasons.push_back("tf32: Xe-HPC's XMX engines run TF32 for fp32 matmuls");
      break;
    case XeArch::xe_hpg:
    case XeArch::xe2_hpg:
    case XeArch::xe2_lpg:
    case XeArch::xe_lpg_plus:
      r.xmx = r.bf16 = r.fp16 = true;
      r.reasons.push_back("bf16: " + arch + "'s XMX engines run bf16 and fp16; no TF32 on " + arch);
      break;
    case XeArch::xe_lpg:
      r.fp16 = true;
      r.reasons.push_back("fp16: Xe-LPG has no XMX engines; its vector engines run fp16 at twice the fp32 rate "
                          "and have no bf16 arithmetic (bf16 not offered)");
      break;
    case XeArch::xe_lp:
      r.reasons.push_back("fp32: Xe-LP (" + id_text(device_id) + ") is not a GPU PyTorch's XPU backend supports");
      break;
    case XeArch::unknown:
      r.reasons.push_back("fp32: architecture unknown for PCI id " + id_text(device_id));
      break;
  }
  r.integrated = r.arch == XeArch::xe_lp ? device_id < 0x4900 || device_id > 0x4909
                                         : r.arch == XeArch::xe_lpg || r.arch == XeArch::xe_lpg_plus ||
                                               r.arch == XeArch::xe2_lpg;
  r.pytorch_target = r.arch != XeArch::xe_lp && r.arch != XeArch::unknown;
  r.dtype = r.bf16 ? Dtype::bf16 : r.fp16 ? Dtype::fp16 : Dtype::fp32;
  return r;
}

const char* product_name(std::uint32_t device_id) {
  struct Name {
    std::uint32_t id;
    const char* name;
  };
  static constexpr Name kNames[] = {
      {0x56a0, "Intel Arc A770"},          {0x56a1, "Intel Arc A750"},
      {0x56a2, "Intel Arc A580"},          {0x56a5, "Intel Arc A380"},
      {0x56a6, "Intel Arc A310"},          {0x56c0, "Intel Data Center GPU Flex 170"},
      {0x56c1, "Intel Data Center GPU Flex 140"}, {0x0bd5, "Intel Data Center GPU Max 1550"},
      {0x0bd6, "Intel Data Center GPU Max 1550"}, {0x0bda, "Intel Data Center GPU Max 1100"},
      {0x0bdb, "Intel Data Center GPU Max 1100"}, {0xe20b, "Intel Arc B580"},
      {0xe20c, "Intel Arc B570"},          {0x7d55, "Intel Arc Graphics (Core Ultra, Meteor Lake)"},
      {0x7dd5, "Intel Graphics (Core Ultra, Meteor Lake)"}, {0x7d51, "Intel Arc Graphics (Core Ultra 200H)"},
      {0x64a0, "Intel Arc 140V/130V (Core Ultra 200V)"},
  };
  for (const Name& n : kNames)
    if (n.id == device_id) return n.name;
  return "";
}

}  // namespace accelkit::xpu
