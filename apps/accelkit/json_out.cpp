#include "json_out.hpp"

#include <iostream>
#include <type_traits>
#include <variant>

#include "format.hpp"

namespace accelkit::cli {

Json setting_value_json(const SettingValue& v) {
  return std::visit([](const auto& x) { return Json(x); }, v);
}

Json device_json(const DeviceInfo& d) {
  Json props = Json::object();
  for (const auto& [k, v] : d.properties) props[k] = v;
  return Json{{"id", d.id},
              {"torch_device", d.torch_device},
              {"name", d.name},
              {"vendor", d.vendor},
              {"kind", to_string(d.kind)},
              {"memory_bytes", d.memory_bytes},
              {"capabilities", capability_names(d.capabilities)},
              {"properties", std::move(props)},
              {"warnings", d.warnings}};
}

Json plugin_json(const PluginRecord& p) {
  Json j{{"name", p.name},
         {"path", p.path},
         {"status", to_string(p.status)},
         {"reason", p.reason},
         {"version", p.version},
         {"torch_version", p.torch_version},
         {"cxx_abi", p.cxx_abi},
         {"description", p.description},
         {"scan", p.scan.empty() ? Json(nullptr) : Json(p.scan)}};
  Json devices = Json::array();
  if (p.probe) {
    for (const auto& d : p.probe->devices) devices.push_back(device_json(d));
    j["devices"] = std::move(devices);
    j["score"] = p.probe->score;
    j["reasons"] = p.probe->reasons;
    j["warnings"] = p.probe->warnings;
  } else {
    j["devices"] = std::move(devices);
    j["score"] = nullptr;
    j["reasons"] = Json::array();
    j["warnings"] = Json::array();
  }
  return j;
}

Json plugins_json(const std::vector<PluginRecord>& plugins) {
  Json out = Json::array();
  for (const auto& p : plugins) out.push_back(plugin_json(p));
  return out;
}

Json settings_json(const Settings& s) {
  Json out = Json::object();
  for (const auto& [key, e] : s.all())
    out[key] = Json{{"value", setting_value_json(e.value)},
                    {"origin", to_string(e.origin)},
                    {"source", e.source},
                    {"why", e.why}};
  return out;
}

Json decisions_json(const std::vector<RuntimeDecision>& decisions) {
  Json out = Json::array();
  for (const auto& d : decisions)
    out.push_back(Json{{"key", d.key}, {"value", d.value}, {"source", d.source}, {"why", d.why}});
  return out;
}

Json candidate_json(const Candidate& c) {
  return Json{{"plugin", c.plugin},
              {"device", c.device.id},
              {"name", c.device.name},
              {"kind", to_string(c.device.kind)},
              {"score", c.score},
              {"eligible", c.eligible},
              {"reason", c.reason}};
}

Json selected_json(const Decision& d) {
  if (!d.selected) return nullptr;
  const Candidate& s = *d.selected;
  return Json{{"plugin", s.plugin},
              {"device", s.device.id},
              {"torch_device", s.device.torch_device},
              {"name", s.device.name},
              {"kind", to_string(s.device.kind)},
              {"score", s.score},
              {"reasons", decision_reasons(d)}};
}

Json decision_json(const Decision& d) {
  Json candidates = Json::array();
  for (const auto& c : d.candidates) candidates.push_back(candidate_json(c));
  Json j{{"ok", d.ok},
         {"explicit_request", d.explicit_request},
         {"selected", selected_json(d)},
         {"candidates", std::move(candidates)},
         {"reasons", d.reasons},
         {"hints", d.hints}};
  if (!d.ok) j["error"] = d.error;
  return j;
}

std::vector<std::string> decision_reasons(const Decision& d) {
  std::vector<std::string> out;
  for (const auto& c : d.candidates) out.push_back(c.device.id + ": " + c.reason);
  for (const auto& r : d.reasons) out.push_back(r);
  for (const auto& h : d.hints) out.push_back("hint: " + h);
  return out;
}

void print_json(const Json& j) {
  std::cout << j.dump(2, ' ', false, Json::error_handler_t::replace) << std::endl;
}

}  // namespace accelkit::cli
