// Operation routing: which device runs an operation class. Most operations run on the
// negotiated device; a plugin can send a class elsewhere (RDNA1: fft -> cpu) through the
// capability convention "route.<op>" / "route.<op>.why" (capability.hpp), and a config file's
// [routing] table overrides both:
//
//   [routing]
//   fft = "cpu"       # cpu | device (the negotiated device) | auto (the plugin's rule)
//
// resolve_routes() is a pure function of the device and the overrides; run_routed() moves a
// tensor to the routed device, runs the operation and brings the result back.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <c10/core/Device.h>

#include "accelkit/sdk/device.hpp"
#include "accelkit/op_class.hpp"
#include "accelkit/settings.hpp"

namespace at { class Tensor; }

namespace accelkit {

// One [routing] entry the settings hold (not auto).
struct RoutingOverride {
  OpClass op;
  RouteTarget target = RouteTarget::automatic;
  std::string source;  // "/p/x.toml:4:1"
};

// The [routing] entries of `settings` that are not auto, in OpClass order.
std::vector<RoutingOverride> routing_overrides(const Settings& settings);
// The same for the settings a TOML file makes (no environment); throws SettingsError naming
// file:line:column for an unknown operation class (with the nearest one) or a bad target.
std::vector<RoutingOverride> read_routing_config(const std::string& config_path);

struct Route {
  OpClass op;
  c10::Device device{c10::kCPU};  // where the operation runs
  bool on_device = true;          // false: sent away from the negotiated device
  std::string origin;             // "default" | "plugin" | "file"
  std::string source;             // "built-in", "rocm:0 capability route.fft", "/p/x.toml:4:1"
  std::string reason;
};

// Every operation class's route for `device` (its torch_device must not be empty).
std::vector<Route> resolve_routes(const DeviceInfo& device, const std::vector<RoutingOverride>& overrides);
// resolve_routes() with the settings' [routing] entries.
std::vector<Route> routes_for(const DeviceInfo& device, const Settings& settings);
// The route of `op` among `routes`; throws std::out_of_range when it is missing.
const Route& route_for(const std::vector<Route>& routes, OpClass op);

// `input` moved to `route.device`, `op` run there, the result moved back to input's device.
at::Tensor run_routed(const Route& route, const at::Tensor& input,
                      const std::function<at::Tensor(const at::Tensor&)>& op);
// torch::fft::fft(input, n, dim) on the fft route.
at::Tensor routed_fft(const Route& fft_route, const at::Tensor& input, std::optional<int64_t> n = std::nullopt,
                      int64_t dim = -1);

}  // namespace accelkit
