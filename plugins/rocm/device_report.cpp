#include "device_report.hpp"

#include <cstdio>

#include <accelkit/sdk/host_paths.hpp>

namespace accelkit::rocm {
namespace {

std::string hex4(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x", v);
  return buf;
}

std::string fraction_text(double f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.2f", f);
  return buf;
}

// The LibTorch index of a GPU: by PCI bus id when HIP enumerated devices, else its position
// among KFD GPU nodes (HIP's order when no *_VISIBLE_DEVICES variable reorders it).
int torch_index_of(const RocmGpu& g, const RocmProbe& probe, const TorchBackend& torch) {
  if (!torch.rocm_build) return -1;
  const std::string pci = g.pci_address();
  if (!probe.hip.pci_bus_ids.empty()) {
    for (std::size_t i = 0; i < probe.hip.pci_bus_ids.size(); ++i)
      if (!pci.empty() && probe.hip.pci_bus_ids[i] == pci)
        return static_cast<int>(i) < torch.device_count ? static_cast<int>(i) : -1;
    return -1;
  }
  return g.hsa_index >= 0 && g.hsa_index < torch.device_count ? g.hsa_index : -1;
}

DeviceInfo device_info(const RocmGpu& g, std::size_t i, int torch_index, const RocmProbe& probe,
                       const TorchBackend& torch) {
  DeviceInfo d;
  d.id = "rocm:" + std::to_string(i);
  d.torch_device = torch_index >= 0 ? "cuda:" + std::to_string(torch_index) : "";
  d.name = gpu_name(g);
  d.vendor = "AMD";
  const bool apu = g.kfd && g.kfd->is_apu();
  d.kind = apu ? DeviceKind::integrated_gpu : DeviceKind::discrete_gpu;
  d.memory_bytes = g.vram_bytes();
  if (g.kfd) {  // compute units: SIMDs / SIMDs per CU
    auto per_cu = g.kfd->properties.find("simd_per_cu");
    if (per_cu != g.kfd->properties.end() && per_cu->second > 0 && g.kfd->simd_count > 0)
      d.cores = static_cast<std::uint32_t>(g.kfd->simd_count / per_cu->second);
  }

  CapabilitySet& caps = d.capabilities;
  caps.add(Capability::fp32);
  if (g.rules.bf16) caps.add(Capability::bf16);
  if (g.rules.fp16) caps.add(Capability::fp16);
  // Memory figures (device_memory.hpp): the allocator's on a GPU LibTorch drives, the card's
  // VRAM from sysfs otherwise.
  if ((torch_index >= 0 && torch.allocator_stats) || (g.card && g.card->vram_total_bytes && g.card->has_vram_used))
    caps.add(Capability::memory_stats);
  if (g.card) {
    if (g.card->has_temperature) caps.add(Capability::thermal);
    if (!g.card->power_file.empty()) caps.add(Capability::power);
    if (g.card->has_busy_percent) caps.add(Capability::utilisation);
  }
  if (g.gfx) caps.set("gfx", g.gfx->name());
  if (torch_index >= 0) caps.set(kCollectivesKey, "nccl");  // RCCL, under the name LibTorch's ROCm build gives it
  caps.set("arch", to_string(g.rules.family));
  if (g.rules.fft_on_cpu) {
    caps.set(std::string(kRoutePrefix) + "fft", "cpu");
    caps.set(std::string(kRoutePrefix) + "fft" + kRouteReasonSuffix,
             "rocFFT is unreliable on " + (g.gfx ? g.gfx->name() : std::string("this GPU")) + " (" +
                 to_string(g.rules.family) + ")");
  }

  auto& props = d.properties;
  if (g.gfx) props.emplace_back("gfx", g.gfx->name());
  props.emplace_back("architecture", to_string(g.rules.family));
  if (!g.pci_address().empty()) props.emplace_back("pci_bus_id", g.pci_address());
  if (g.card) {
    props.emplace_back("pci_id", "1002:" + hex4(g.card->device_id));
    props.emplace_back("drm", g.card->card + (g.card->render_minor >= 0
                                                   ? ", renderD" + std::to_string(g.card->render_minor)
                                                   : std::string()));
    props.emplace_back("power sensor", g.card->power_file.empty() ? "none" : g.card->power_file);
  }
  if (g.kfd) {
    props.emplace_back("kfd node", std::to_string(g.kfd->node));
    props.emplace_back("simd_count", std::to_string(g.kfd->simd_count));
  }
  props.emplace_back("precision", to_string(g.rules.dtype));
  if (g.rules.disable_hipblaslt) props.emplace_back("hipBLASLt", "off (TORCH_BLAS_PREFER_HIPBLASLT=0)");
  if (g.rules.memory_fraction < 1.0) props.emplace_back("memory fraction", fraction_text(g.rules.memory_fraction));
  if (g.preset) {
    props.emplace_back("preset", g.preset->name + " (" + g.preset->why + ")");
    props.emplace_back("preset batch_size", std::to_string(g.preset->batch_size));
    props.emplace_back("preset grad_accumulation", std::to_string(g.preset->grad_accumulation));
    props.emplace_back("preset model_width", std::to_string(g.preset->model_width));
  }
  if (probe.hip.runtime_version) props.emplace_back("HIP runtime", hip_version_string(*probe.hip.runtime_version));

  if (g.rules.family == ArchFamily::rdna1)
    d.warnings.push_back(g.gfx->name() + " (RDNA1) is not a ROCm-supported target: it runs in fp32 with FFTs on "
                         "the CPU, hipBLASLt off and a " + fraction_text(g.rules.memory_fraction) +
                         " memory fraction");
  if (!g.gfx) d.warnings.push_back("architecture unknown (the card is not in the KFD topology): fp32 only");
  return d;
}

}  // namespace

std::string gpu_name(const RocmGpu& g) {
  if (g.card && !g.card->product_name.empty()) {
    const std::string& n = g.card->product_name;
    return n.rfind("AMD", 0) == 0 ? n : "AMD " + n;
  }
  if (g.card) return "AMD GPU [1002:" + hex4(g.card->device_id) + "]";
  return "AMD GPU" + (g.gfx ? " " + g.gfx->name() : std::string());
}

RocmReport make_rocm_report(const RocmProbe& probe, const TorchBackend& torch) {
  RocmReport out;
  RocmReport& r = out;
  int usable = 0;
  for (std::size_t i = 0; i < probe.gpus.size(); ++i) {
    const int idx = torch_index_of(probe.gpus[i], probe, torch);
    out.torch_index.push_back(idx);
    r.devices.push_back(device_info(probe.gpus[i], i, idx, probe, torch));
    if (idx >= 0) ++usable;
  }
  const std::string n = std::to_string(probe.gpus.size()) + " AMD GPU" + (probe.gpus.size() == 1 ? "" : "s");

  if (probe.gpus.empty()) {
    r.reasons.push_back("no AMD GPU: no amdgpu card (vendor 0x1002) under " + sysfs_path("class/drm") +
                        " and no GPU node in the KFD topology");
  } else if (!torch.rocm_build) {
    r.reasons.push_back(std::string(kNotRocmBuild) + " (" + torch.evidence + "): " + n +
                        " listed and monitored, not usable for training");
    r.warnings.push_back("to train on the AMD GPU, use a ROCm build of LibTorch (it exposes AMD GPUs as "
                         "device type CUDA) and rebuild accelkit against it");
  } else if (usable == 0) {
    r.reasons.push_back("LibTorch is a ROCm build (" + torch.evidence + ") but sees " +
                        std::to_string(torch.device_count) + " device(s) matching none of the " + n +
                        ": check /dev/kfd and /dev/dri access (video and render groups) and "
                        "HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES");
  } else {
    r.score = 100;
    r.reasons.push_back("LibTorch is a ROCm build (" + torch.evidence + "): " + std::to_string(usable) + " of " +
                        n + " usable");
  }
  if (!probe.gpus.empty()) {
    if (!probe.kfd_present)
      r.warnings.push_back("no KFD topology under " + sysfs_path("class/kfd") +
                           ": the amdgpu driver has no compute (HSA) support enabled");
    r.reasons.push_back(probe.hip.loaded
                            ? "HIP runtime " + probe.hip.library + " " +
                                  (probe.hip.runtime_version ? hip_version_string(*probe.hip.runtime_version)
                                                             : std::string("(version unknown)"))
                            : "no HIP runtime (libamdhip64.so not found)");
    if (probe.smi.loaded)
      r.reasons.push_back("ROCm SMI " + probe.smi.library + (probe.smi.version.empty() ? "" : " " + probe.smi.version));
  }
  for (const auto& note : probe.notes) r.reasons.push_back(note);
  for (const auto& w : probe.warnings) r.warnings.push_back(w);
  return out;
}

}  // namespace accelkit::rocm
