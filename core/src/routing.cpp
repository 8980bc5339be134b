// Operation routing: the [routing] table, plugin rules, and running an operation where it is routed.
#include "accelkit/routing.hpp"


#include <ATen/ATen.h>
#include <toml++/toml.h>

#include "accelkit/settings.hpp"
#include "config_file.hpp"
#include "toml_text.hpp"

namespace accelkit {

std::string_view to_string(OpClass op) noexcept {
  for (const auto& [o, name] : kOpClassNames)
    if (o == op) return name;
  return "unknown";
}

std::optional<OpClass> op_class_from_string(std::string_view name) noexcept {
  for (const auto& [o, n] : kOpClassNames)
    if (n == name) return o;
  return std::nullopt;
}

std::vector<std::string> op_class_names() {
  std::vector<std::string> out;
  for (const auto& entry : kOpClassNames) out.emplace_back(entry.second);
  return out;
}

namespace {

const std::vector<std::string>& targets() {
  static const std::vector<std::string> t = {"auto", "cpu", "device"};
  return t;
}

// Overrides and problems of the [routing] table, in file order.
void parse_routing(const std::string& path, std::vector<RoutingOverride>& out, std::vector<std::string>& problems) {
  const config_detail::ParsedConfig config = config_detail::parse_config(path);
  if (!config.root) return;  // Settings reports an unreadable file and syntax errors
  const toml::node* node = config.root->get("routing");
  if (!node || !node->is_table()) return;  // a non-table [routing] is Settings' error
  for (const auto& [k, n] : config_detail::in_file_order(*node->as_table())) {
    const std::string key(k->str());
    const std::string at = toml_position(path, k->source());
    auto op = op_class_from_string(key);
    if (!op) {
      std::string msg = "unknown operation class 'routing." + key + "' in " + at + " (one of " +
                        [] {
                          std::string all;
                          for (const auto& name : op_class_names()) all += (all.empty() ? "" : ", ") + name;
                          return all;
                        }() + ")";
      if (auto guess = nearest_word(key, op_class_names()); !guess.empty()) msg += "; did you mean '" + guess + "'?";
      problems.push_back(std::move(msg));
      continue;
    }
    const auto* value = n->as_string();
    if (!value) {
      problems.push_back("'routing." + key + "' in " + at + " must be a string (auto, cpu or device), got " +
                         toml_type_name(n->type()));
      continue;
    }
    const std::string target = value->get();
    if (std::find(targets().begin(), targets().end(), target) == targets().end()) {
      std::string msg = "'routing." + key + "' in " + at + " must be one of auto, cpu, device, got '" + target + "'";
      if (auto guess = nearest_word(target, targets()); !guess.empty()) msg += "; did you mean '" + guess + "'?";
      problems.push_back(std::move(msg));
      continue;
    }
    out.push_back({*op, target, at});
  }
}

}  // namespace

std::vector<std::string> routing_config_problems(const std::string& config_path) {
  std::vector<RoutingOverride> overrides;
  std::vector<std::string> problems;
  parse_routing(config_path, overrides, problems);
  return problems;
}

std::vector<RoutingOverride> read_routing_config(const std::string& config_path) {
  std::vector<RoutingOverride> overrides;
  std::vector<std::string> problems;
  parse_routing(config_path, overrides, problems);
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "\n") + p;
    throw SettingsError(all);
  }
  return overrides;
}

std::vector<Route> resolve_routes(const DeviceInfo& device, const std::vector<RoutingOverride>& overrides) {
  if (device.torch_device.empty())
    throw std::invalid_argument("routing: " + device.id + " has no LibTorch device");
  const c10::Device main(device.torch_device);
  std::vector<Route> routes;
  for (const auto& [op, name] : kOpClassNames) {
    Route r{op, main, true, "default", "built-in", "runs on the negotiated device " + device.id};
    // The plugin's rule: "route.<op>" = "cpu" (capability.hpp).
    const std::string key = std::string(kRoutePrefix) + std::string(name);
    if (auto it = device.capabilities.extra.find(key); it != device.capabilities.extra.end() && it->second == "cpu") {
      auto why = device.capabilities.extra.find(key + kRouteReasonSuffix);
      r = Route{op, c10::Device(c10::kCPU), false, "plugin", device.id + " capability " + key,
                why != device.capabilities.extra.end() ? why->second : "the plugin routes it to the CPU"};
    }
    // The config file's [routing] entry (the last one for a class wins).
    for (const RoutingOverride& o : overrides) {
      if (o.op != op || o.target == "auto") continue;
      if (o.target == "cpu")
        r = Route{op, c10::Device(c10::kCPU), main.type() != c10::kCPU, "file", o.source, "routing." + std::string(name) + " = \"cpu\""};
      else
        r = Route{op, main, true, "file", o.source, "routing." + std::string(name) + " = \"device\" (" + device.id + ")"};
    }
    if (!r.on_device && main.is_cpu()) r.on_device = true;  // the CPU is the device
    routes.push_back(std::move(r));
  }
  return routes;
}

std::vector<Route> routes_for(const DeviceInfo& device, const Settings& settings) {
  const auto& file = settings.config_file();
  return resolve_routes(device, file ? read_routing_config(*file) : std::vector<RoutingOverride>{});
}

const Route& route_for(const std::vector<Route>& routes, OpClass op) {
  for (const Route& r : routes)
    if (r.op == op) return r;
  throw std::out_of_range("no route for operation class '" + std::string(to_string(op)) + "'");
}

at::Tensor run_routed(const Route& route, const at::Tensor& input,
                      const std::function<at::Tensor(const at::Tensor&)>& op) {
  if (input.device() == route.device) return op(input);
  at::Tensor result = op(input.to(route.device));
  return result.to(input.device());
}

at::Tensor routed_fft(const Route& fft_route, const at::Tensor& input, std::optional<int64_t> n, int64_t dim) {
  return run_routed(fft_route, input, [&](const at::Tensor& x) {
    return at::fft_fft(x, n ? c10::optional<int64_t>(*n) : c10::nullopt, dim);
  });
}

}  // namespace accelkit
