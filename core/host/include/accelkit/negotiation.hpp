// Negotiation: which device the program runs on, and why - a pure function of the plugins'
// probe reports and the request, so it is testable without loading anything.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "accelkit/loader.hpp"
#include "accelkit/pci.hpp"
#include "accelkit/settings.hpp"

namespace accelkit {

struct DeviceRequest {
  DeviceSelector device;             // auto | <plugin> | <plugin>:<index>
  std::string device_origin = "built-in";  // where `device` came from ("--device", "ACCELKIT_DEVICE", "/p/x.toml:2:1")
  bool no_gpu = false;               // only CPU-kind devices
  std::vector<std::string> prefer;   // plugin names, most preferred first
  std::vector<std::string> require;  // capability names every candidate must have
  // A data-parallel launcher's LOCAL_RANK (-1: none): where the chosen plugin has several
  // eligible devices and no index was asked for, this process takes the one at
  // local_rank mod their count (cuda:LOCAL_RANK on a machine of GPUs).
  int local_rank = -1;
};

// Why a candidate cannot be chosen (none: it is eligible).
enum class Exclusion {
  none,
  plugin_unusable,     // the plugin was probed but is not usable (score 0, probe failed)
  no_torch_device,     // LibTorch in this process cannot drive it (listed, not usable)
  no_gpu,              // --no-gpu and the device is not a CPU
  not_requested,       // the user asked for another device
  missing_capability,  // lacks a capability in `require`
  reference_only,      // a reference device (Capability::reference_device): only on request
  new_device_taken,    // a new device type while another plugin's is active (one per process)
};

struct Candidate {
  std::string plugin;
  DeviceInfo device;
  std::size_t device_index = 0;  // index into the plugin's probe devices
  int score = 0;
  bool eligible = false;
  Exclusion excluded = Exclusion::none;
  std::string reason;  // why chosen, why not, or why ranked lower (for people)
};

struct Decision {
  bool ok = false;
  bool explicit_request = false;   // the user named a device (or --no-gpu): failure is exit 3
  std::optional<Candidate> selected;
  std::vector<Candidate> candidates;  // every device of every plugin, best first
  std::vector<std::string> reasons;   // one line per plugin that offered no device
  std::vector<std::string> hints;     // "NVIDIA GPU on the PCI bus but no usable cuda plugin: ..."
  std::string error;                  // when !ok: what was asked, what is available
};

// Rank of a declared device kind in `auto` (lower ranks first): discrete GPU 0 < integrated
// GPU 1 < NPU 2 < other 3 < CPU 4. Within a kind the plugin's score decides; plugin names
// enter the order only through DeviceRequest::prefer.
int kind_rank(DeviceKind kind) noexcept;

Decision negotiate(const std::vector<PluginRecord>& plugins, const DeviceRequest& request,
                   const std::vector<PciGpu>& pci = {});

}  // namespace accelkit
