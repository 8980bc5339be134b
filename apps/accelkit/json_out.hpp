// JSON for the verbs' --json output (key order kept as written).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "accelkit/context.hpp"

namespace accelkit {
// The typed values as their settings spelling in JSON, never as numbers.
NLOHMANN_JSON_SERIALIZE_ENUM(Dtype, {{Dtype::fp32, "fp32"}, {Dtype::bf16, "bf16"}, {Dtype::fp16, "fp16"}})
NLOHMANN_JSON_SERIALIZE_ENUM(Toggle, {{Toggle::automatic, "auto"}, {Toggle::on, "on"}, {Toggle::off, "off"}})
NLOHMANN_JSON_SERIALIZE_ENUM(BlasKernels, {{BlasKernels::automatic, "auto"}, {BlasKernels::library, "library"}})
}  // namespace accelkit

namespace accelkit::cli {

using Json = nlohmann::ordered_json;

Json setting_value_json(const SettingValue& v);
Json device_json(const DeviceInfo& d);
Json plugin_json(const PluginRecord& p);
Json plugins_json(const std::vector<PluginRecord>& plugins);
Json settings_json(const Settings& s);
// [{key, value, source, why}] of what the runtime decided beside the settings.
Json decisions_json(const std::vector<RuntimeDecision>& decisions);
Json candidate_json(const Candidate& c);
// {plugin, device, torch_device, name, score, reasons[]} or null when nothing was selected.
Json selected_json(const Decision& d);
// ok, explicit_request, selected, candidates, reasons, hints, error.
Json decision_json(const Decision& d);

// The why of a decision, one line each: every candidate, every plugin that offered no
// device, then the hints.
std::vector<std::string> decision_reasons(const Decision& d);

// Prints `j` (indented) and a newline.
void print_json(const Json& j);

}  // namespace accelkit::cli
