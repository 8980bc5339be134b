// What the xpu plugin learns about the machine: Intel GPUs from DRM sysfs (i915/xe) and from
// Level Zero, matched by PCI address (a multi-stack GPU such as the Data Center GPU Max 1550
// is one card and, in Level Zero's default flat hierarchy, one device per stack), and the
// architecture rules of each. Torch-free; reads through sysfs_path().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "arch_rules.hpp"
#include "intel_card.hpp"
#include "level_zero.hpp"

namespace accelkit::xpu {

struct XpuGpu {
  std::optional<IntelCard> card;  // nullopt when only Level Zero shows it
  std::optional<ZeDevice> ze;     // nullopt when Level Zero does not list it (or is absent)
  int ze_index = -1;              // position among Level Zero's Intel GPUs: LibTorch's XPU order
  XpuRules rules;
  std::optional<SysmanReading> sysman;  // Sysman's answers at probe time (which sensors exist)
  std::uint32_t device_id() const { return ze ? ze->device_id : card ? card->device_id : 0; }
  std::string pci_address() const;
  bool integrated() const { return ze ? ze->integrated() : rules.integrated; }
  std::uint64_t memory_bytes() const;  // the driver's VRAM figure, else Level Zero's
};

struct XpuProbe {
  std::vector<XpuGpu> gpus;
  LevelZero level_zero;
  std::vector<std::string> notes;     // facts worth showing
  std::vector<std::string> warnings;  // problems, with the fix or what was refused
};

struct ProbeOptions {
  bool load_level_zero = true;
  LevelZeroOptions level_zero;
};

XpuProbe probe_xpu(const ProbeOptions& options = {});

}  // namespace accelkit::xpu
