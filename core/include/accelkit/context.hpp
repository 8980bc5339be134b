// Context: accelkit started once - settings resolved, plugins loaded and probed, device
// negotiated. What the CLI verbs and training programs stand on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accelkit/loader.hpp"
#include "accelkit/negotiation.hpp"
#include "accelkit/precision.hpp"
#include "accelkit/settings.hpp"

namespace accelkit {

struct ContextOptions {
  SettingsInputs settings;
  LoaderOptions loader;
};

// A requested device could not be had (exit code 3). what() lists what is available.
class DeviceUnavailableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Context {
 public:
  // Resolves settings (throws SettingsError), discovers plugins and negotiates. Does not
  // throw for an unavailable device: decision().ok says, and require_device() throws.
  static std::unique_ptr<Context> create(const ContextOptions& options);

  const Settings& settings() const noexcept { return settings_; }
  Settings& settings() noexcept { return settings_; }
  const Discovery& discovery() const noexcept { return discovery_; }
  const Decision& decision() const noexcept { return decision_; }
  const std::vector<PciGpu>& pci() const noexcept { return pci_; }

  // Throws DeviceUnavailableError unless negotiation succeeded.
  const Candidate& require_device() const;
  // Opens the negotiated device; the returned object keeps its plugin loaded.
  std::shared_ptr<Device> open_selected() const;
  // The record of a loaded plugin by name, or nullptr.
  const PluginRecord* plugin(const std::string& name) const;

 private:
  Context() = default;
  Settings settings_;
  Discovery discovery_;
  Decision decision_;
  std::vector<PciGpu> pci_;
};

// Requests derived from settings: device, no_gpu, prefer, require, with their origins.
DeviceRequest device_request_from(const Settings& settings);
// The precision request the settings make (precision, tf32, threads, blas_kernels), typed.
PrecisionRequest precision_request_from(const Settings& settings);

}  // namespace accelkit
