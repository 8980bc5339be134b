#include "xpu_report.hpp"

#include <cstdio>

#include <accelkit/sdk/host_paths.hpp>

namespace accelkit::xpu {
namespace {

std::string hex4(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x", v);
  return buf;
}

// Why LibTorch cannot train on `g` (index -1), or its XPU index.
int torch_index_of(const XpuGpu& g, const TorchXpu& torch, std::string& why) {
  if (!torch.has_xpu) {
    why = kNoXpu;
    return -1;
  }
  if (!g.rules.pytorch_target) {
    why = std::string(to_string(g.rules.arch)) + " [8086:" + hex4(g.device_id()) +
          "] is not a GPU PyTorch's XPU backend supports";
    return -1;
  }
  if (g.ze_index < 0) {
    why = "Level Zero does not list it, so LibTorch's XPU backend cannot see it";
    return -1;
  }
  if (g.ze_index >= torch.device_count) {
    why = "LibTorch sees " + std::to_string(torch.device_count) + " XPU device(s); this is Level Zero's GPU " +
          std::to_string(g.ze_index) + " (check ZE_AFFINITY_MASK / ONEAPI_DEVICE_SELECTOR)";
    return -1;
  }
  return g.ze_index;
}

void add_capabilities(DeviceInfo& d, const XpuGpu& g, int torch_index) {
  CapabilitySet& caps = d.capabilities;
  caps.add(Capability::fp32);
  if (g.rules.bf16) caps.add(Capability::bf16);
  if (g.rules.fp16) caps.add(Capability::fp16);
  if (g.rules.tf32) caps.add(Capability::tf32);
  const bool sysman_temp = g.sysman && g.sysman->temperature_c;
  const bool sysman_energy = g.sysman && g.sysman->energy;
  const bool sysman_memory = g.sysman && g.sysman->memory_size;
  if ((g.card && !g.card->temp_file.empty()) || sysman_temp) caps.add(Capability::thermal);
  if ((g.card && !g.card->energy_file.empty()) || sysman_energy) caps.add(Capability::power);
  if (torch_index >= 0 || sysman_memory) caps.add(Capability::memory_stats);
  caps.set("arch", to_string(g.rules.arch));
  caps.set("xmx", g.rules.xmx ? "true" : "false");
}

void add_properties(DeviceInfo& d, const XpuGpu& g) {
  auto& props = d.properties;
  props.emplace_back("architecture", to_string(g.rules.arch));
  props.emplace_back("pci_id", "8086:" + hex4(g.device_id()));
  if (!g.pci_address().empty()) props.emplace_back("pci_bus_id", g.pci_address());
  if (g.card) {
    props.emplace_back("driver", g.card->driver);
    props.emplace_back("drm", g.card->card + (g.card->render_minor >= 0
                                                  ? ", renderD" + std::to_string(g.card->render_minor)
                                                  : std::string()));
    if (g.card->tiles > 1) props.emplace_back("tiles", std::to_string(g.card->tiles));
    props.emplace_back("VRAM", g.card->vram_bytes ? std::to_string(*g.card->vram_bytes) + " bytes (" +
                                                        g.card->vram_source + ")"
                                                  : std::string("not reported by the driver"));
    props.emplace_back("hwmon", g.card->hwmon_dir.empty() ? "none" : g.card->hwmon_dir);
  }
  if (g.ze) {
    props.emplace_back("Level Zero device", std::to_string(g.ze_index));
    if (g.ze->execution_units) props.emplace_back("execution units", std::to_string(g.ze->execution_units));
    if (g.ze->core_clock_mhz) props.emplace_back("max clock", std::to_string(g.ze->core_clock_mhz) + " MHz");
  }
  props.emplace_back("XMX", g.rules.xmx ? "yes" : "no");
  props.emplace_back("precision", to_string(g.rules.dtype));
}

DeviceInfo device_info(const XpuGpu& g, std::size_t i, int torch_index) {
  DeviceInfo d;
  d.id = "xpu:" + std::to_string(i);
  d.torch_device = torch_index >= 0 ? "xpu:" + std::to_string(torch_index) : "";
  d.name = gpu_name(g);
  d.vendor = "Intel";
  d.kind = g.integrated() ? DeviceKind::integrated_gpu : DeviceKind::discrete_gpu;
  d.memory_bytes = g.memory_bytes();
  if (g.ze && g.ze->execution_units) d.cores = g.ze->execution_units;
  add_capabilities(d, g, torch_index);
  add_properties(d, g);
  if (!g.rules.pytorch_target)
    d.warnings.push_back(std::string(to_string(g.rules.arch)) + " is not a PyTorch XPU target: listed and monitored only");
  return d;
}

void level_zero_reasons(const XpuProbe& probe, XpuReport& r) {
  const LevelZero& lz = probe.level_zero;
  if (!lz.loaded) {
    r.reasons.push_back("no Level Zero loader (" + (lz.error.empty() ? std::string("not looked for") : lz.error) +
                        "): LibTorch's XPU backend needs it; install level-zero (libze1) and Intel's GPU driver "
                        "(libze-intel-gpu1 or intel-level-zero-gpu)");
  } else if (!lz.initialised) {
    r.reasons.push_back("Level Zero " + lz.library + ": " + lz.error);
  } else {
    r.reasons.push_back("Level Zero " + lz.library + ": " + std::to_string(lz.devices.size()) + " Intel GPU(s)");
  }
}

}  // namespace

std::string gpu_name(const XpuGpu& g) {
  if (g.ze && !g.ze->name.empty()) return g.ze->name;
  const std::string known = product_name(g.device_id());
  return (known.empty() ? std::string("Intel GPU") : known) + " [8086:" + hex4(g.device_id()) + "]";
}

XpuReport make_xpu_report(const XpuProbe& probe, const TorchXpu& torch) {
  XpuReport r;
  int usable = 0;
  for (std::size_t i = 0; i < probe.gpus.size(); ++i) {
    std::string why;
    const int idx = torch_index_of(probe.gpus[i], torch, why);
    r.torch_index.push_back(idx);
    r.unusable.push_back(idx >= 0 ? std::string() : why);
    r.devices.push_back(device_info(probe.gpus[i], i, idx));
    if (idx >= 0) ++usable;
  }
  const std::string n = std::to_string(probe.gpus.size()) + " Intel GPU" + (probe.gpus.size() == 1 ? "" : "s");
  if (probe.gpus.empty()) {
    r.reasons.push_back("no Intel GPU: no card of vendor 0x8086 on i915 or xe under " + sysfs_path("class/drm") +
                        " and none from Level Zero");
  } else if (!torch.has_xpu) {
    r.reasons.push_back(std::string(kNoXpu) + " (" + torch.evidence + "): " + n +
                        " listed and monitored, not usable for training");
    r.warnings.push_back(kXpuHint);
  } else if (usable == 0) {
    r.reasons.push_back("LibTorch has XPU (" + torch.evidence + ") but none of the " + n + " is usable: " +
                        r.unusable.front());
  } else {
    r.score = 100;
    r.reasons.push_back("LibTorch has XPU (" + torch.evidence + "): " + std::to_string(usable) + " of " + n +
                        " usable");
  }
  if (!probe.gpus.empty() || probe.level_zero.loaded) level_zero_reasons(probe, r);
  for (const auto& note : probe.notes) r.reasons.push_back(note);
  for (const auto& w : probe.warnings) r.warnings.push_back(w);
  return r;
}

}  // namespace accelkit::xpu
