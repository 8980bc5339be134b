#include "xpu_probe.hpp"

#include <accelkit/sdk/host_paths.hpp>

namespace accelkit::xpu {

std::string XpuGpu::pci_address() const {
  if (ze && !ze->pci_address.empty()) return ze->pci_address;
  return card ? card->pci_address : std::string();
}

std::uint64_t XpuGpu::memory_bytes() const {
  if (card && card->vram_bytes) {
    // A multi-stack card seen as one device per stack: each stack's share.
    const int tiles = card->tiles > 1 && ze ? card->tiles : 1;
    return *card->vram_bytes / static_cast<std::uint64_t>(tiles);
  }
  return ze ? ze->memory_bytes : 0;
}

namespace {

// Level Zero devices with the card they sit on; the cards no device matched, in `used`.
void match(XpuProbe& p, const std::vector<IntelCard>& cards, std::vector<bool>& used) {
  const auto& devices = p.level_zero.devices;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    XpuGpu g;
    g.ze = devices[i];
    g.ze_index = static_cast<int>(i);
    for (std::size_t c = 0; c < cards.size() && !g.card; ++c) {
      const bool by_pci = !devices[i].pci_address.empty() && devices[i].pci_address == cards[c].pci_address;
      // Without a PCI address from the driver: the only card there is.
      const bool only = devices[i].pci_address.empty() && cards.size() == 1 && devices.size() == 1;
      if (by_pci || only) {
        g.card = cards[c];
        used[c] = true;
      }
    }
    if (!g.card)
      p.notes.push_back(devices[i].name + " (Level Zero) has no i915/xe card under " + sysfs_path("class/drm") +
                        ": no driver sensors for it");
    p.gpus.push_back(std::move(g));
  }
}

}  // namespace

XpuProbe probe_xpu(const ProbeOptions& options) {
  XpuProbe p;
  std::vector<std::string> problems;
  const std::vector<IntelCard> cards = find_intel_cards(&p.notes, &problems);
  for (auto& why : problems) p.warnings.push_back(std::move(why));
  if (options.load_level_zero) {
    p.level_zero = load_level_zero(options.level_zero);
    for (const auto& n : p.level_zero.notes) p.notes.push_back(n);
    for (const auto& w : p.level_zero.problems) p.warnings.push_back("Level Zero: " + w);
  }
  std::vector<bool> used(cards.size(), false);
  match(p, cards, used);
  for (std::size_t c = 0; c < cards.size(); ++c) {
    if (used[c]) continue;
    XpuGpu g;
    g.card = cards[c];
    if (p.level_zero.initialised)
      p.notes.push_back(cards[c].card + " (" + cards[c].pci_address + ") is not among Level Zero's GPUs");
    p.gpus.push_back(std::move(g));
  }
  for (XpuGpu& g : p.gpus) {
    g.rules = xpu_rules(g.device_id());
    if (g.ze && p.level_zero.sysman) {
      g.sysman = read_sysman(*p.level_zero.sysman, g.ze->handle);
      for (const auto& why : g.sysman->problems) p.warnings.push_back(g.ze->name + ": Sysman: " + why);
    }
  }
  return p;
}

}  // namespace accelkit::xpu
