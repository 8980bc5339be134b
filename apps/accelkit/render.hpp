// Human-readable sections shared by the verbs (info, plugins, report).
#pragma once

#include <ostream>

#include "accelkit/context.hpp"

namespace accelkit::cli {

// "Selected: cpu:0  <name>" or "Selected: none" with the error.
void render_selected(std::ostream& out, const Decision& d);
// Every candidate with its reason, the plugins that offered nothing, the hints.
void render_candidates(std::ostream& out, const Decision& d);
// One row per plugin; `verbose` adds probe reasons under each.
void render_plugins(std::ostream& out, const std::vector<PluginRecord>& plugins, bool verbose);
// The device-generic plugin's name (plugins/torch).
inline constexpr const char* kGenericPlugin = "torch";
// Which plugin serves each of LibTorch's device types among the devices found.
void render_device_types(std::ostream& out, const std::vector<PluginRecord>& plugins);
// Each device of each loaded plugin: capabilities, properties, warnings.
void render_devices(std::ostream& out, const std::vector<PluginRecord>& plugins);
void render_settings(std::ostream& out, const Settings& s);
// What the runtime decided beside the settings (nothing when it decided nothing).
void render_decisions(std::ostream& out, const std::vector<RuntimeDecision>& decisions);

}  // namespace accelkit::cli
