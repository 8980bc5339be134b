#include "cuda_report.hpp"

#include <cstdio>

namespace accelkit::cuda {
namespace {

std::string visible_devices_text(const CudaProbe& p) {
  return p.cuda_visible_devices ? "CUDA_VISIBLE_DEVICES='" + *p.cuda_visible_devices + "'" : "CUDA_VISIBLE_DEVICES unset";
}

const char* compute_mode_name(int mode) {
  switch (mode) {
    case kComputeModeDefault: return "default";
    case kComputeModeProhibited: return "prohibited";
    case kComputeModeExclusiveProcess: return "exclusive_process";
  }
  return "other";
}

std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string join_archs(const std::vector<int>& archs) {
  std::string out;
  for (int a : archs) out += (out.empty() ? "sm_" : ",sm_") + std::to_string(a);
  return out.empty() ? "none" : out;
}

// Why this device cannot run work from this process, or "" when it can.
std::string device_blocker(const GpuFacts& g) {
  if (g.compute_mode == kComputeModeProhibited)
    return "compute mode is prohibited (nvidia-smi -c DEFAULT re-enables it)";
  if (g.compute_mode == kComputeModeExclusiveProcess && g.running_processes > 0)
    return "busy: exclusive-process compute mode and " + std::to_string(g.running_processes) +
           " process(es) already use it";
  return "";
}

DeviceInfo device_info(const GpuFacts& g, const TorchCudaStatus& torch, const CudaProbe& probe, bool usable) {
  DeviceInfo d;
  d.id = "cuda:" + std::to_string(g.ordinal);
  d.torch_device = usable ? d.id : "";
  d.name = g.name;
  d.vendor = "NVIDIA";
  d.kind = g.integrated ? DeviceKind::integrated_gpu : DeviceKind::discrete_gpu;
  d.memory_bytes = g.memory_bytes;
  d.cores = g.sm_count > 0 ? static_cast<std::uint32_t>(g.sm_count) : 0;

  const ComputeCapability cc{g.cc_major, g.cc_minor};
  const ArchFeatures f = arch_features(cc, torch.torch_major);
  auto& caps = d.capabilities;
  caps.add(Capability::fp32);
  if (f.fp16_tensor_cores || cc.value() >= 53) caps.add(Capability::fp16);
  if (f.tf32) caps.add(Capability::tf32);
  if (f.bf16) caps.add(Capability::bf16);
  if (f.fp8) caps.add(Capability::fp8);
  if (torch.has_cuda) {
    if (f.sdpa_flash) caps.add(Capability::sdpa_flash);
    if (f.sdpa_mem_efficient) caps.add(Capability::sdpa_mem_efficient);
    caps.add(Capability::memory_stats);
    // c10d's ProcessGroupNCCL, in a CUDA LibTorch built with NCCL: made by this plugin.
    if (torch.nccl) caps.set(kCollectivesKey, "nccl");
    if (torch.graph_capture) caps.add(Capability::graph_capture);
    if (torch.fused_adamw && kernel_runs_on(torch.kernel_archs, cc)) {
      caps.add(Capability::fused_adamw);
      // The fused AdamW keeps fp32 masters of bf16 weights (the kernel writes the bf16 copy).
      if (f.bf16) caps.add(Capability::master_weights);
      // The same Optimizer steps SGD programs with LibTorch's at::_fused_sgd_ (2.3+).
      if (torch.fused_sgd) caps.add(Capability::fused_sgd);
    }
  }
  if (g.has_temperature) caps.add(Capability::thermal);
  if (g.has_power) caps.add(Capability::power);
  if (g.has_utilisation) caps.add(Capability::utilisation);
  caps.set("compute_capability", cc.str());
  caps.set("sm_count", std::to_string(g.sm_count));
  if (f.fp16_tensor_cores) caps.set("tensor_cores", "1");
  // Tensor-core tiles: fp16/bf16 operands in multiples of 8, int8 of 16, TF32 of 4.
  if (f.fp16_tensor_cores) {
    caps.set(std::string(kAlignPrefix) + "fp16", "8");
    if (f.bf16) caps.set(std::string(kAlignPrefix) + "bf16", "8");
    caps.set(std::string(kAlignPrefix) + "int8", "16");
  }
  if (f.tf32) caps.set(std::string(kAlignPrefix) + "fp32", "4");

  auto& props = d.properties;
  props.emplace_back("compute capability", cc.str());
  props.emplace_back("multiprocessors", std::to_string(g.sm_count));
  props.emplace_back("memory", g.memory_bytes ? gib(g.memory_bytes) : "unknown");
  props.emplace_back("pci_bus_id", g.pci_bus_id.empty() ? "unknown" : g.pci_bus_id);
  props.emplace_back("uuid", g.uuid.empty() ? "unknown" : g.uuid);
  props.emplace_back("compute mode", compute_mode_name(g.compute_mode));
  props.emplace_back("driver", cuda_version_text(probe.driver_version) +
                                   (probe.nvml_driver_version.empty() ? "" : " (" + probe.nvml_driver_version + ")"));
  props.emplace_back("nvml", g.nvml ? "matched by " + g.nvml_match : g.nvml_match);
  props.emplace_back("visible devices", visible_devices_text(probe));
  if (torch.has_cuda)
    props.emplace_back("fused adamw kernel", torch.fused_adamw ? join_archs(torch.kernel_archs) +
                                                                     (kernel_runs_on(torch.kernel_archs, cc) ? "" : " (not for this device)")
                                                               : "not built");

  if (std::string b = device_blocker(g); !b.empty()) d.warnings.push_back(d.id + " unusable: " + b);
  if (g.nvml && !g.has_temperature) d.warnings.push_back("temperature n/a: NVML does not support it on this device");
  return d;
}

}  // namespace

std::string cuda_version_text(int version) {
  if (version <= 0) return "unknown";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

CudaReport make_cuda_report(const CudaProbe& p, const TorchCudaStatus& torch) {
  CudaReport r;
  if (!p.driver_error.empty()) {
    r.reasons.push_back("no NVIDIA driver: " + p.driver_error);
    return r;
  }
  if (!p.init_error.empty()) {
    std::string why = p.init_error;
    if (p.init_result == kCudaErrorNoDevice) why = "no CUDA device (" + visible_devices_text(p) + "): " + why;
    if (p.init_result == kCudaErrorSystemDriverMismatch)
      why += "; the kernel module and libcuda versions differ (reboot or reinstall the driver)";
    if (p.init_result == kCudaErrorInsufficientDriver) why = "driver too old for this GPU or libcuda: " + why;
    r.reasons.push_back(why);
    return r;
  }
  if (p.gpus.empty()) {
    r.reasons.push_back("the driver (CUDA " + cuda_version_text(p.driver_version) + ") sees no device (" +
                        visible_devices_text(p) + ")");
    return r;
  }

  // Whether LibTorch here can drive these devices at all.
  std::string blocker;
  if (!torch.has_cuda) {
    blocker = "LibTorch " + std::to_string(torch.torch_major) + "." + std::to_string(torch.torch_minor) +
              " in this process was built without CUDA: the GPUs are listed but cannot be used (install "
              "a CUDA build of LibTorch)";
  } else if (torch.runtime_version > 0 && p.driver_version > 0 &&
             p.driver_version / 1000 < torch.runtime_version / 1000) {
    blocker = "driver too old: it supports CUDA " + cuda_version_text(p.driver_version) +
              ", LibTorch's runtime is CUDA " + cuda_version_text(torch.runtime_version) +
              " (update the NVIDIA driver)";
  } else if (torch.runtime_version > 0 && p.driver_version > 0 && p.driver_version < torch.runtime_version) {
    r.warnings.push_back("driver supports CUDA " + cuda_version_text(p.driver_version) + ", older than LibTorch's CUDA " +
                         cuda_version_text(torch.runtime_version) +
                         " runtime: minor-version compatibility applies (no PTX JIT of newer code)");
  }

  int usable = 0;
  for (const auto& g : p.gpus) {
    const bool ok = blocker.empty() && device_blocker(g).empty();
    usable += ok;
    r.devices.push_back(device_info(g, torch, p, ok));
    r.usable.push_back(ok);
  }
  if (!blocker.empty()) {
    r.reasons.push_back(blocker);
  } else if (usable == 0) {
    r.reasons.push_back("every CUDA device is prohibited or busy");
  } else {
    r.score = kCudaScore;
    r.reasons.push_back(std::to_string(usable) + " of " + std::to_string(p.gpus.size()) +
                        " CUDA device(s) usable; driver CUDA " + cuda_version_text(p.driver_version) +
                        ", LibTorch runtime CUDA " + cuda_version_text(torch.runtime_version));
  }
  for (const auto& d : r.devices)
    for (const auto& w : d.warnings) r.warnings.push_back(w);
  if (!p.nvml_error.empty()) r.warnings.push_back("NVML unavailable, telemetry is n/a: " + p.nvml_error);
  if (p.cuda_visible_devices) r.reasons.push_back(visible_devices_text(p) + " (the driver lists only those)");
  return r;
}

}  // namespace accelkit::cuda
