// Operation routing: the [routing] table, plugin rules, and running an operation where it is routed.
#include "accelkit/routing.hpp"


#include <ATen/ATen.h>

#include "accelkit/settings.hpp"

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

std::vector<RoutingOverride> routing_overrides(const Settings& settings) {
  std::vector<RoutingOverride> out;
  for (const auto& [op, name] : kOpClassNames) {
    const Setting<RouteTarget>& r = settings->route(op);
    if (*r != RouteTarget::automatic) out.push_back({op, *r, r.from()});
  }
  return out;
}

std::vector<RoutingOverride> read_routing_config(const std::string& config_path) {
  SettingsInputs in;
  in.config_path = config_path;
  in.env = std::map<std::string, std::string>{};
  return routing_overrides(Settings::resolve(in));
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
      if (o.op != op || o.target == RouteTarget::automatic) continue;
      if (o.target == RouteTarget::cpu)
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
  return resolve_routes(device, routing_overrides(settings));
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
