#include "rocm_probe.hpp"

#include <accelkit/sdk/host_paths.hpp>

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::rocm {

std::string RocmGpu::pci_address() const {
  if (card && !card->pci_address.empty()) return card->pci_address;
  return kfd ? kfd->pci_address : std::string();
}

namespace {

// The built-in presets, or ACCELKIT_ROCM_PRESETS when set (falls back with a warning).
PresetTable load_presets(RocmProbe& probe) {
  if (const char* path = secure_env("ACCELKIT_ROCM_PRESETS"); path && *path) {
    try {
      auto file = host::read_file(path);
      if (!file.ok()) throw PresetError(std::string(path) + ": cannot read the file: " + host::error_text(file.error));
      PresetTable t = parse_presets(file.text, path);
      probe.notes.push_back(std::string("presets from ACCELKIT_ROCM_PRESETS=") + path);
      return t;
    } catch (const PresetError& e) {
      probe.warnings.push_back(std::string("ACCELKIT_ROCM_PRESETS ignored, using the built-in presets: ") + e.what());
    }
  }
  return parse_presets(builtin_presets_text(), "presets.toml");
}

}  // namespace

RocmProbe probe_rocm(const ProbeOptions& options) {
  RocmProbe p;
  KfdTopology topo = read_kfd_topology();
  p.kfd_present = topo.present;
  std::vector<std::string> unreadable;
  std::vector<AmdgpuCard> cards = find_amdgpu_cards(&unreadable);
  for (auto& why : unreadable) p.warnings.push_back(std::move(why));
  std::vector<bool> card_used(cards.size(), false);

  int hsa_index = 0;
  for (const KfdNode& node : topo.gpus()) {
    RocmGpu g;
    g.kfd = node;
    g.gfx = node.gfx;
    g.hsa_index = hsa_index++;
    for (std::size_t i = 0; i < cards.size() && !g.card; ++i) {
      if (card_used[i]) continue;
      const bool by_render = node.drm_render_minor >= 0 && node.drm_render_minor == cards[i].render_minor;
      const bool by_pci = !node.pci_address.empty() && node.pci_address == cards[i].pci_address;
      if (by_render || by_pci) {
        g.card = cards[i];
        card_used[i] = true;
      }
    }
    if (!g.card)
      p.notes.push_back("KFD node " + std::to_string(node.node) + " (" + (g.gfx ? g.gfx->name() : "?") +
                        ") has no matching amdgpu card: no sensors for it");
    p.gpus.push_back(std::move(g));
  }
  for (std::size_t i = 0; i < cards.size(); ++i) {
    if (card_used[i]) continue;
    RocmGpu g;
    g.card = cards[i];
    p.gpus.push_back(std::move(g));
    p.notes.push_back(cards[i].card + " is not in the KFD topology" +
                      (topo.present ? std::string(" (no compute node for it)")
                                    : " (" + sysfs_path("class/kfd") + " is missing: amdgpu without KFD)") +
                      ": its architecture is unknown and HIP cannot use it");
  }

  PresetTable presets;
  try {
    presets = load_presets(p);
  } catch (const PresetError& e) {
    p.warnings.push_back(std::string("built-in presets unreadable: ") + e.what());
  }
  for (RocmGpu& g : p.gpus) {
    if (g.gfx) g.rules = arch_rules(*g.gfx);
    else g.rules.reasons.push_back("fp32: architecture unknown (no KFD gfx_target_version)");
    if (g.vram_bytes() > 0)
      g.preset = select_preset(presets, g.vram_bytes(), g.card ? g.card->device_id : 0, g.gfx ? g.gfx->name() : "");
  }

  if (options.load_libraries) {
    p.hip = load_hip_runtime(options.enumerate_hip);
    p.smi = load_rocm_smi();
  }
  return p;
}

}  // namespace accelkit::rocm
