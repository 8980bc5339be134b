// Operation routing: names, plugin rules (capability route.<op>), [routing] overrides with
// their errors, run_routed/routed_fft on the CPU with a fake rule, and Runtime::route.
#include <ATen/ATen.h>

#include "accelkit/routing.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/settings.hpp"

#include "torch_doctest.hpp"

#include <algorithm>

#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace routing_suite {

using namespace accelkit;
using accelkit::test::contains;

namespace {

const std::string kFixtures = ACCELKIT_ROUTING_FIXTURES;

// A fake accelerator ("meta" stands in for a GPU: only the device matters here) whose plugin
// routes FFTs to the CPU.
DeviceInfo fake_gpu(bool fft_rule) {
  DeviceInfo d;
  d.id = "fake:0";
  d.torch_device = "meta";
  if (fft_rule) {
    d.capabilities.set(std::string(kRoutePrefix) + "fft", "cpu");
    d.capabilities.set(std::string(kRoutePrefix) + "fft" + kRouteReasonSuffix, "FFT kernels unstable on fake:0");
  }
  return d;
}

std::string error_of(const std::string& path) {
  try {
    read_routing_config(path);
  } catch (const SettingsError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("operation class names round-trip") {
  for (const auto& name : op_class_names()) {
    auto op = op_class_from_string(name);
    REQUIRE(op);
    CHECK(to_string(*op) == name);
  }
  CHECK(op_class_from_string("fft") == OpClass::fft);
  CHECK_FALSE(op_class_from_string("FFT"));
  CHECK_FALSE(op_class_from_string(""));
}

TEST_CASE("without rules every class runs on the device") {
  auto routes = resolve_routes(fake_gpu(false), {});
  CHECK(routes.size() == op_class_names().size());
  for (const Route& r : routes) {
    CHECK(r.device.type() == c10::kMeta);
    CHECK(r.on_device);
    CHECK(r.origin == "default");
  }
}

TEST_CASE("a plugin rule routes fft to the CPU with its reason; the rest stays") {
  auto routes = resolve_routes(fake_gpu(true), {});
  const Route& fft = route_for(routes, OpClass::fft);
  CHECK(fft.device.is_cpu());
  CHECK_FALSE(fft.on_device);
  CHECK(fft.origin == "plugin");
  CHECK(fft.source == "fake:0 capability route.fft");
  CHECK(fft.reason == "FFT kernels unstable on fake:0");
  CHECK(route_for(routes, OpClass::sort).device.type() == c10::kMeta);
}

TEST_CASE("[routing] overrides the plugin rule, with file:line:column") {
  const std::string path = kFixtures + "/fft_cpu.toml";
  auto overrides = read_routing_config(path);
  REQUIRE(overrides.size() == 2);
  CHECK(overrides[0].op == OpClass::fft);
  CHECK(overrides[0].target == RouteTarget::cpu);
  CHECK(overrides[0].source == path + ":4:1");
  CHECK(overrides[1].op == OpClass::sort);

  // fft = "cpu" on a device without a rule; sort = "device" keeps sort where it is.
  auto routes = resolve_routes(fake_gpu(false), overrides);
  const Route& fft = route_for(routes, OpClass::fft);
  CHECK(fft.device.is_cpu());
  CHECK(fft.origin == "file");
  CHECK(fft.source == path + ":4:1");
  CHECK(route_for(routes, OpClass::sort).device.type() == c10::kMeta);
  CHECK(route_for(routes, OpClass::sort).origin == "file");

  // fft = "device" brings fft back from a plugin rule; auto leaves the rule alone.
  auto back = resolve_routes(fake_gpu(true), {{OpClass::fft, RouteTarget::device, "x.toml:2:1"}});
  CHECK(route_for(back, OpClass::fft).device.type() == c10::kMeta);
  CHECK(route_for(back, OpClass::fft).origin == "file");
  auto kept = resolve_routes(fake_gpu(true), {{OpClass::fft, RouteTarget::automatic, "x.toml:2:1"}});
  CHECK(route_for(kept, OpClass::fft).origin == "plugin");
}

TEST_CASE("[routing] errors name the key, file:line:column and the fix; Settings refuses the file") {
  const std::string path = kFixtures + "/unknown_op.toml";
  const std::string e = error_of(path);
  CHECK_MESSAGE(contains(e, "unknown operation class 'routing.fftt' in " + path + ":2:1"), e);
  CHECK(contains(e, "did you mean 'fft'?"));
  CHECK(contains(e, "'routing.sort' in " + path + ":3:1 must be one of auto, cpu, device, got 'gpu'"));
  CHECK(contains(e, "'routing.scatter' in " + path + ":4:1 must be a string"));
  CHECK(std::count(e.begin(), e.end(), '\n') == 2);  // three problems, one line each
  CHECK(error_of(kFixtures + "/fft_cpu.toml").empty());
  CHECK(contains(error_of(kFixtures + "/does_not_exist.toml"), "cannot read config file"));

  SettingsInputs in;
  in.config_path = path;
  in.env = std::map<std::string, std::string>{};
  try {
    Settings::resolve(in);
    FAIL("Settings::resolve accepted a bad [routing] table");
  } catch (const SettingsError& err) {
    CHECK(contains(err.what(), "routing.fftt"));
  }
}

TEST_CASE("run_routed and routed_fft on the CPU with a fake rule: same result as a direct FFT") {
  auto routes = resolve_routes(fake_gpu(true), {});
  const Route& fft = route_for(routes, OpClass::fft);
  REQUIRE(fft.device.is_cpu());

  at::manual_seed(7);
  const at::Tensor x = at::randn({4, 64}, at::kDouble);
  c10::Device seen(c10::kMeta);
  at::Tensor y = run_routed(fft, x, [&](const at::Tensor& t) {
    seen = t.device();
    return at::fft_fft(t);
  });
  CHECK(seen.is_cpu());
  CHECK(y.device() == x.device());
  // Same kernel, same input: equal to rounding (fp64).
  CHECK(at::allclose(y, at::fft_fft(x), 1e-12, 1e-12));
  const at::Tensor z = routed_fft(fft, x, 32, 1);
  CHECK(z.size(1) == 32);
  CHECK(at::allclose(z, at::fft_fft(x, 32, 1), 1e-12, 1e-12));
  // Inverse of the routed FFT gives the input back.
  CHECK(at::allclose(at::real(at::fft_ifft(routed_fft(fft, x))), x, 1e-10, 1e-10));
}

#ifdef ACCELKIT_CPU_PLUGIN_PATH
TEST_CASE("Runtime::route follows the config's [routing] table") {
  ContextOptions o;
  o.settings.config_path = kFixtures + "/fft_cpu.toml";
  o.settings.env = std::map<std::string, std::string>{};
  o.loader.read_environment = false;
  o.loader.include_default_dirs = false;
  const std::string dir = std::filesystem::path(ACCELKIT_CPU_PLUGIN_PATH).parent_path().string();
  if (!insecure_path_reason(dir).empty()) {
    MESSAGE("skipped: the build tree is group/other writable, the loader refuses it");
    return;
  }
  o.loader.cli_paths = {dir};
  auto rt = Runtime::start(o);
  CHECK(rt->route(OpClass::fft).device.is_cpu());
  CHECK(rt->route(OpClass::fft).origin == "file");
  CHECK(contains(rt->route(OpClass::fft).source, "fft_cpu.toml:4:1"));
  CHECK(rt->route(OpClass::scatter).origin == "default");
  CHECK(rt->routes().size() == op_class_names().size());
}
#endif

}  // namespace routing_suite
