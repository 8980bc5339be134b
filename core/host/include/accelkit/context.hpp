// Context: accelkit started once - settings resolved, plugins loaded and probed, device
// negotiated. What the CLI verbs and training programs stand on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accelkit/device_error.hpp"
#include "accelkit/loader.hpp"
#include "accelkit/negotiation.hpp"
#include "accelkit/sdk/precision.hpp"
#include "accelkit/settings.hpp"

namespace accelkit {

struct ContextOptions {
  SettingsInputs settings;
  LoaderOptions loader;
};

// A value the runtime decided after the settings were resolved - the auto-tuner's choice, a
// profile's request the device cannot honour - kept beside the settings (which stay as the
// user and the profile made them) and shown by `accelkit report`.
struct RuntimeDecision {
  std::string key;     // the setting it stands in for: "precision", "tf32", ...
  std::string value;   // what the runtime uses: "bf16", "auto"
  std::string source;  // "autotune cache /c/x.json", "cpu:0"
  std::string why;     // one line
};

class Context {
 public:
  // Resolves settings (throws SettingsError), discovers plugins and negotiates. Does not
  // throw for an unavailable device: decision().ok says, and require_device() throws.
  static std::unique_ptr<Context> create(const ContextOptions& options);
  // The same with settings already resolved (the file is not read again).
  static std::unique_ptr<Context> create(Settings settings, const LoaderOptions& loader);

  const Settings& settings() const noexcept { return settings_; }
  // The typed settings (settings().config()).
  const Config& config() const noexcept { return settings_.config(); }
  // What the runtime decided beside the settings, oldest first; a later decision for the same
  // key replaces the earlier one.
  const std::vector<RuntimeDecision>& decisions() const noexcept { return decisions_; }
  void record(RuntimeDecision decision);
  const Discovery& discovery() const noexcept { return discovery_; }
  const Decision& decision() const noexcept { return decision_; }
  const std::vector<PciGpu>& pci() const noexcept { return pci_; }

  // Throws DeviceUnavailableError unless negotiation succeeded.
  const Candidate& require_device() const;
  // Opens the negotiated device; the returned object keeps its plugin loaded.
  std::shared_ptr<Device> open_selected() const;
  // Opens any candidate of the decision, chosen or not (one LibTorch here cannot train on is
  // still worth watching: `monitor --all`). Throws std::runtime_error saying why it cannot.
  std::shared_ptr<Device> open(const Candidate& candidate) const;
  // The record of a loaded plugin by name, or nullptr.
  const PluginRecord* plugin(const std::string& name) const;

 private:
  Context() = default;
  Settings settings_;
  std::vector<RuntimeDecision> decisions_;
  Discovery discovery_;
  Decision decision_;
  std::vector<PciGpu> pci_;
};

// Requests derived from settings: device, no_gpu, prefer, require, with their origins.
DeviceRequest device_request_from(const Config& config);
// The precision request the settings make (precision, tf32, threads, blas_kernels).
PrecisionRequest precision_request_from(const Config& config);

}  // namespace accelkit
