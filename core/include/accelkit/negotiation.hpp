// Negotiation: which device the program runs on, and why - a pure function of the plugins'
// probe reports and the request, so it is testable without loading anything.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "accelkit/loader.hpp"
#include "accelkit/pci.hpp"

namespace accelkit {

struct DeviceRequest {
  std::string device = "auto";       // auto | <plugin> | <plugin>:<index>
  std::string device_origin = "default";  // where `device` came from ("--device", "ACCELKIT_DEVICE", "config file x.toml")
  bool no_gpu = false;               // only CPU-kind devices
  std::vector<std::string> prefer;   // plugin names, most preferred first
  std::vector<std::string> require;  // capability names every candidate must have
};

struct Candidate {
  std::string plugin;
  DeviceInfo device;
  std::size_t device_index = 0;  // index into the plugin's probe devices
  int score = 0;
  bool eligible = false;
  std::string reason;  // why chosen, why not, or why ranked lower
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

// Rank of a plugin family in `auto`: cuda 0 < rocm 1 < mps 2 < others' GPUs 3 < cpu 4.
int family_rank(const std::string& plugin, DeviceKind kind) noexcept;

Decision negotiate(const std::vector<PluginRecord>& plugins, const DeviceRequest& request,
                   const std::vector<PciGpu>& pci = {});

}  // namespace accelkit
