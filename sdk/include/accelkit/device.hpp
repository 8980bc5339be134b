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

#include "accelkit/capability.hpp"
#include "accelkit/status.hpp"
#include "accelkit/step_capture.hpp"

namespace torch::optim { class Optimizer; }

namespace accelkit {

class Precision;
class Optimizer;
class Monitor;

enum class DeviceKind { cpu, discrete_gpu, integrated_gpu, other };

inline const char* to_string(DeviceKind k) noexcept {
  switch (k) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::discrete_gpu: return "discrete_gpu";
    case DeviceKind::integrated_gpu: return "integrated_gpu";
    case DeviceKind::other: return "other";
  }
  return "other";
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
  CapabilitySet capabilities;
  // Ordered facts for display ("physical cores" = "16", "pci_bus_id" = "0000:01:00.0").
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
  // host then uses torch::optim.
  virtual Result<std::shared_ptr<Optimizer>> optimizer() noexcept = 0;
  // Telemetry for this device. Never null on success; missing sensors read as n/a.
  virtual Result<std::shared_ptr<Monitor>> monitor() noexcept = 0;

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
    return capture("capture_step", []() -> Result<std::shared_ptr<CapturedStep>> {
      return Status(StatusCode::not_supported, "this device's plugin has no whole-step capture");
    });
  }
};

}  // namespace accelkit
