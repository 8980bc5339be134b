// What the ROCm plugin learns about the machine: AMD GPUs from amdgpu sysfs and the KFD
// topology (matched by render node, else PCI address), their architecture rules and presets,
// and the ROCm libraries present. Torch-free; reads through sysfs_path().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "amdgpu_card.hpp"
#include "arch_rules.hpp"
#include "kfd_topology.hpp"
#include "presets.hpp"
#include "runtime_libs.hpp"

namespace accelkit::rocm {

struct RocmGpu {
  std::optional<KfdNode> kfd;     // nullopt when KFD does not show the card
  std::optional<AmdgpuCard> card; // nullopt when only KFD shows it
  std::optional<GfxTarget> gfx;
  ArchRules rules;
  std::optional<Preset> preset;
  int hsa_index = -1;             // position among KFD GPU nodes: HIP's enumeration order
  std::string pci_address() const;
  std::uint64_t vram_bytes() const { return card ? card->vram_total_bytes : 0; }
};

struct RocmProbe {
  bool kfd_present = false;
  std::vector<RocmGpu> gpus;
  HipRuntimeInfo hip;
  SmiInfo smi;
  std::vector<std::string> notes;     // facts worth showing
  std::vector<std::string> warnings;  // problems, with the fix
};

struct ProbeOptions {
  bool load_libraries = true;  // dlopen libamdhip64 / librocm_smi64
  bool enumerate_hip = false;  // initialise HIP to map devices by PCI bus id
};

RocmProbe probe_rocm(const ProbeOptions& options);

}  // namespace accelkit::rocm
