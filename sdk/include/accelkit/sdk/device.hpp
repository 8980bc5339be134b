// Device: one accelerator (or the CPU) a plugin found, and the factory for its Precision,
// Optimizer and Monitor.
//
// Ownership: the host holds every object a plugin returns through std::shared_ptr and keeps
// the plugin's library loaded for as long as any of them lives (plugins are never unloaded).
// A Device may hand out the same Precision/Monitor object more than once.
// Thread-safety: info() may be called concurrently; the factories are called from one thread
// at a time unless a plugin documents more.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "accelkit/sdk/capability.hpp"
#include "accelkit/sdk/collectives.hpp"
#include "accelkit/sdk/device_runtime.hpp"
#include "accelkit/sdk/memory.hpp"
#include "accelkit/sdk/status.hpp"
#include "accelkit/sdk/step_capture.hpp"

namespace torch::optim { class Optimizer; }

namespace accelkit {

class Precision;
class Optimizer;
class Monitor;

// What kind of device a plugin declares. `auto` negotiation ranks devices by kind first
// (discrete GPU > integrated GPU > NPU > other > CPU), then by the plugin's score; plugin
// names never enter the order, so a new backend ranks as what it declares.
enum class DeviceKind {
  cpu,
  discrete_gpu,    // a GPU with its own memory (a PCIe/SXM card)
  integrated_gpu,  // a GPU sharing the host's memory (APU, Apple silicon)
  npu,             // a neural/tensor accelerator that is not a GPU. Since ABI 4.0.
  other,
};

inline const char* to_string(DeviceKind k) noexcept {
  switch (k) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::discrete_gpu: return "discrete_gpu";
    case DeviceKind::integrated_gpu: return "integrated_gpu";
    case DeviceKind::npu: return "npu";
    case DeviceKind::other: return "other";
  }
  return "other";
}

// For people: "discrete GPU", "integrated GPU", "NPU", "CPU", "other device".
inline const char* describe(DeviceKind k) noexcept {
  switch (k) {
    case DeviceKind::cpu: return "CPU";
    case DeviceKind::discrete_gpu: return "discrete GPU";
    case DeviceKind::integrated_gpu: return "integrated GPU";
    case DeviceKind::npu: return "NPU";
    case DeviceKind::other: return "other device";
  }
  return "other device";
}

// Everything a probe learns about one device. Plain value, copied freely.
struct DeviceInfo {
  std::string id;            // what --device names: "<plugin>:<index>", e.g. "cuda:1", "cpu:0"
  std::string torch_device;  // LibTorch device string ("cpu", "cuda:0"); empty when LibTorch
                             // here cannot drive it (the card is listed, not usable)
  std::string name;          // marketing name ("AMD Ryzen 9 7950X", "NVIDIA H100 80GB HBM3")
  std::string vendor;        // "AMD", "Intel", "NVIDIA", ...
  DeviceKind kind = DeviceKind::other;
  std::uint64_t memory_bytes = 0;  // 0 = unknown
  // The cores it computes with: physical cores of a CPU, SMs/CUs of a GPU; 0 = unknown.
  // The host sizes thread pools from it. Since ABI 4.0.
  std::uint32_t cores = 0;
  CapabilitySet capabilities;
  // Ordered facts for people ("physical cores" = "16", "pci_bus_id" = "0000:01:00.0"). Shown,
  // never parsed: the host takes what it acts on from the typed fields above.
  std::vector<std::pair<std::string, std::string>> properties;
  // Things the user should know about this device, with the fix where there is one.
  std::vector<std::string> warnings;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const noexcept = 0;
  // Precision rules for this device. Never null on success.
  virtual Result<std::shared_ptr<Precision>> precision() noexcept = 0;
  // The plugin's optimizer implementations; Status(not_supported) when it has none, and the
  // host then uses torch::optim (or what other plugins contribute: Plugin::optimizer_for).
  // A device without its own leaves this default (since ABI 4.0; pure before).
  virtual Result<std::shared_ptr<Optimizer>> optimizer() noexcept {
    return Status(StatusCode::not_supported, "this device's plugin has no optimizer of its own");
  }
  // Telemetry for this device. Never null on success; missing sensors read as n/a. A device
  // without sensors leaves this default (since ABI 4.0; pure before).
  virtual Result<std::shared_ptr<Monitor>> monitor() noexcept {
    return Status(StatusCode::not_supported, "this device's plugin reads no sensors");
  }

  // Whole-step capture (step_capture.hpp). Since ABI 2.0.
  //   optimizer  the optimizer `step` steps; the plugin may keep a reference to it (and may
  //              switch it into a recordable mode it owns, such as a device-side step count).
  //              Must outlive the returned object.
  //   step       one training step on static tensors (see step_capture.hpp); called by the
  //              returned object only, from the thread that calls its run().
  //   warmup     eager runs before recording; values below 1 count as 1.
  // Returns a CapturedStep that is never null on success. Status(not_supported) when this
  // device cannot record steps, saying why ("LibTorch here has no CUDA"); the host then runs
  // the step eagerly and reports that message. Plugins without graph capture leave this
  // default. A device that returns a CapturedStep should list Capability::graph_capture.
  virtual Result<std::shared_ptr<CapturedStep>> capture_step(torch::optim::Optimizer& optimizer,
                                                             std::function<void()> step,
                                                             int warmup) noexcept {
    (void)optimizer;
    (void)step;
    (void)warmup;
    return guarded("capture_step", []() -> Result<std::shared_ptr<CapturedStep>> {
      return Status(StatusCode::not_supported, "this device's plugin has no whole-step capture");
    });
  }

  // A device LibTorch does not know (device_runtime.hpp): its memory, copies and native
  // kernels, which the host registers as LibTorch's PrivateUse1 device. Only for a device
  // whose DeviceInfo::torch_device is "privateuseone:<index>"; others leave this default.
  // Since ABI 6.0.
  virtual Result<DeviceRuntime> runtime() noexcept {
    return Status(StatusCode::not_supported, "this device is one LibTorch knows; it brings no device runtime");
  }

  // This process's memory on the device now (memory.hpp), unknown fields nullopt. A device
  // that reports memory lists Capability::memory_stats. Since ABI 7.0.
  virtual Result<MemoryStats> memory() noexcept {
    return Status(StatusCode::not_supported, "this device's plugin reports no memory figures");
  }
  // Starts a new high-water mark: MemoryStats::peak reads the peak from here on. Since ABI 7.0.
  virtual Status reset_peak_memory() noexcept {
    return Status(StatusCode::not_supported, "this device's plugin keeps no peak it can reset");
  }
  // Gives the allocator's cached, unused memory back to the device (LibTorch's emptyCache()),
  // e.g. after an out-of-memory error. Since ABI 7.0.
  virtual Status empty_cache() noexcept {
    return Status(StatusCode::not_supported, "this device's plugin has no allocator cache to empty");
  }

  // A c10d process group of `request.backend` over this device's tensors (collectives.hpp),
  // for a data-parallel run; never null on success. A plugin whose "collectives" key offers a
  // backend the host cannot make itself (any but "gloo": NCCL lives in the CUDA LibTorch's
  // libtorch_cuda, which only the plugin links) makes it here. Status(not_supported): the
  // plugin makes none, and the host makes Gloo's itself or refuses the backend with this
  // message; any other failure (no NCCL in this LibTorch, the communicator failed) is shown
  // as it is, and the run stops there. Called once per run, with every rank of the run
  // calling it at about the same time. Since ABI 9.0.
  virtual Result<std::shared_ptr<c10d::ProcessGroup>> process_group(const CollectiveRequest& request) noexcept {
    (void)request;
    return Status(StatusCode::not_supported, "this device's plugin makes no process groups of its own");
  }
};

}  // namespace accelkit
