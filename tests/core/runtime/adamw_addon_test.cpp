// Replacing one interface: the example plugin adamw_addon (examples/out-of-tree-plugin) has no
// device; it contributes SimpleAdamW to the negotiated CPU device through
// Plugin::optimizer_for. The core lists it beside the cpu plugin's own implementations, measures
// it with them, and uses it when adamw_implementation names it - matching torch::optim::AdamW
// on fresh random inputs (ACCELKIT_TEST_SEED fixes them).
#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include "torch_doctest.hpp"

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "accelkit/adamw_choice.hpp"
#include "accelkit/runtime.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace adamw_addon_suite {

using namespace accelkit;
using accelkit::test::test_seed;

namespace {

std::unique_ptr<Runtime> runtime(std::vector<std::string> dirs, std::vector<std::pair<std::string, std::string>> cli) {
  ContextOptions o;
  o.settings.env = std::map<std::string, std::string>{};
  o.settings.cli = {{"threads", "1"}, {"device", "cpu"}};  // the CPU even where a GPU is present
  for (auto& kv : cli) o.settings.cli.push_back(std::move(kv));
  o.loader.cli_paths = std::move(dirs);
  o.loader.read_environment = false;
  o.loader.include_default_dirs = false;
  return Runtime::start(o);
}

}  // namespace

TEST_CASE("a plugin without devices contributes an AdamW to the cpu plugin's device") {
  INFO("ACCELKIT_TEST_SEED=" << test_seed());
  test::TempDir cache("accelkit-addon-cache");
  test::ScopedEnv env("ACCELKIT_CACHE_DIR", cache.path().string());

  // Negotiation is unchanged: the add-on offers no device, the CPU is chosen.
  auto pinned = runtime({ACCELKIT_TEST_PLUGIN_DIR, ACCELKIT_ADDON_PLUGIN_DIR},
                        {{"adamw_implementation", "adamw_addon.simple"}});
  CHECK(pinned->device_handle()->info().id == "cpu:0");

  // Pinned: SimpleAdamW, from the add-on, stepping as torch::optim::AdamW does.
  at::manual_seed(test_seed());
  std::vector<at::Tensor> a{at::randn({129, 17}).requires_grad_(), at::randn({1000}).requires_grad_()};
  std::vector<at::Tensor> b;
  for (const auto& t : a) b.push_back(t.detach().clone().requires_grad_(true));
  AdamWConfig config;
  config.lr = 1e-2;
  config.weight_decay = 0.05;
  OptimizerChoice made = pinned->make_adamw(a, config, false);
  INFO(made.implementation << " / " << made.why);
  CHECK(test::contains(made.implementation, "SimpleAdamW"));
  CHECK(test::contains(made.implementation, "from plugin adamw_addon"));
  CHECK(test::contains(made.why, "adamw_implementation = adamw_addon.simple"));
  torch::optim::AdamW reference(b, torch::optim::AdamWOptions(1e-2).weight_decay(0.05));
  for (int step = 0; step < 20; ++step) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      const auto g = at::randn_like(a[i]);
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    made.optimizer->step();
    reference.step();
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double err = (a[i] - b[i]).abs().max().item<double>() / b[i].abs().max().item<double>();
    CHECK(err < 1e-5);
  }

  // Not pinned: measured beside the device's own implementations, like any of them.
  auto measured = runtime({ACCELKIT_TEST_PLUGIN_DIR, ACCELKIT_ADDON_PLUGIN_DIR}, {});
  std::vector<at::Tensor> q{at::zeros({8}, at::requires_grad())};
  OptimizerChoice chosen = measured->make_adamw(q, {}, false);
  REQUIRE(measured->adamw_choice());
  bool timed = false;
  for (const auto& [name, ms] : measured->adamw_choice()->median_ms) timed = timed || (name == "adamw_addon.simple" && ms > 0);
  CHECK(timed);
  CHECK_FALSE(chosen.implementation.empty());

  // Its AdamW keeps no master weights: master_weights = auto does without them (the plugin's
  // reason in `why`), an explicit "on" fails loudly.
  auto pinned_bf16 = runtime({ACCELKIT_TEST_PLUGIN_DIR, ACCELKIT_ADDON_PLUGIN_DIR},
                             {{"adamw_implementation", "adamw_addon.simple"}, {"precision", "bf16"}});
  std::vector<at::Tensor> w{at::randn({16, 8}).requires_grad_()};
  OptimizerChoice without = pinned_bf16->make_adamw(w, {}, true, ForwardOwner::accelkit);
  CHECK_FALSE(without.master_weights);
  CHECK(test::contains(without.implementation, "SimpleAdamW"));
  CHECK(test::contains(without.why, "master_weights = auto (from built-in) skipped: "));
  CHECK(test::contains(without.why, "no fp32 master weights"));
  CHECK((w[0].scalar_type() == at::kFloat));
  auto asked = runtime({ACCELKIT_TEST_PLUGIN_DIR, ACCELKIT_ADDON_PLUGIN_DIR},
                       {{"adamw_implementation", "adamw_addon.simple"}, {"precision", "bf16"}, {"master_weights", "on"}});
  CHECK_THROWS_WITH_AS(asked->make_adamw(w, {}, true, ForwardOwner::accelkit),
                       doctest::Contains("could not create its fused AdamW with master weights"), std::runtime_error);

  // Without the add-on, nothing of it is offered; naming it fails loudly.
  auto alone = runtime({ACCELKIT_TEST_PLUGIN_DIR}, {{"adamw_implementation", "adamw_addon.simple"}});
  CHECK_THROWS_WITH_AS(alone->make_adamw(q, {}, false), doctest::Contains("adamw_addon.simple"), std::runtime_error);
}

}  // namespace adamw_addon_suite
