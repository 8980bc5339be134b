// LibTorch's fused AdamW through support::AtenFusedAdamW against torch::optim::AdamW (fresh
// random inputs; ACCELKIT_TEST_SEED fixes them), checkpoints both ways; the CPU plugin's
// implementation list; and the core's measured choice between implementations, with its cache.
#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include "torch_doctest.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "accelkit/adamw_choice.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/sdk/support/aten_fused_adamw.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace aten_adamw_suite {

using namespace accelkit;
using accelkit::test::test_seed;

namespace {

double rel_err(const at::Tensor& a, const at::Tensor& b) {
  const auto a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
  const double den = b64.norm().item<double>();
  const double num = (a64 - b64).norm().item<double>();
  return den == 0 ? num : num / den;
}

std::vector<at::Tensor> make_params(std::uint64_t seed) {
  at::manual_seed(seed);
  return {at::randn({257, 33}), at::randn({1000}), at::randn({3, 5, 7}), at::randn({1})};
}

// Steps both optimizers with the same fresh gradients; returns the worst parameter error.
double run_both(torch::optim::Optimizer& a, std::vector<at::Tensor>& pa, torch::optim::Optimizer& b,
                std::vector<at::Tensor>& pb, int steps, std::uint64_t seed) {
  at::manual_seed(seed + 99);
  for (int s = 0; s < steps; ++s) {
    for (std::size_t i = 0; i < pa.size(); ++i) {
      const auto g = at::randn_like(pa[i]);
      pa[i].mutable_grad() = g.clone();
      pb[i].mutable_grad() = g.clone();
    }
    a.step();
    b.step();
  }
  double worst = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) worst = std::max(worst, rel_err(pa[i], pb[i]));
  return worst;
}

std::vector<at::Tensor> leaves(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const auto& t : ts) out.push_back(t.detach().clone().requires_grad_(true));
  return out;
}

}  // namespace

TEST_CASE("AtenFusedAdamW matches torch::optim::AdamW, and checkpoints move both ways") {
  if (!support::AtenFusedAdamW::available(c10::DeviceType::CPU)) {
    MESSAGE("skipped: LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR
                                 << " has no CPU kernel for at::_fused_adamw_ (from 2.4)");
    std::vector<at::Tensor> p{at::zeros({2}, at::requires_grad())};
    p[0].mutable_grad() = at::ones({2});
    support::AtenFusedAdamW opt(p);
    CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("no fused AdamW kernel"), c10::Error);
    return;
  }
  const auto seed = test_seed();
  CAPTURE(seed);
  for (bool amsgrad : {false, true}) {
    for (bool maximize : {false, true}) {
      CAPTURE(amsgrad);
      CAPTURE(maximize);
      const auto init = make_params(seed);
      auto pa = leaves(init), pb = leaves(init);
      auto options = torch::optim::AdamWOptions(3e-3).weight_decay(0.05).amsgrad(amsgrad).betas({0.8, 0.99});
      support::AtenFusedAdamW fused(pa, options, maximize);
      torch::optim::AdamW reference(pb, options);
      if (maximize) {
        // torch::optim::AdamW has no maximize: the reference ascends on negated gradients.
        at::manual_seed(seed + 99);
        for (int s = 0; s < 30; ++s) {
          for (std::size_t i = 0; i < pa.size(); ++i) {
            const auto g = at::randn_like(pa[i]);
            pa[i].mutable_grad() = g.clone();
            pb[i].mutable_grad() = -g;
          }
          fused.step();
          reference.step();
        }
        for (std::size_t i = 0; i < pa.size(); ++i) CHECK(rel_err(pa[i], pb[i]) < 1e-5);
        continue;
      }
      // Both fp32, the same update: only float rounding differs (kernel vs ATen ops), ~1e-7
      // per step; 30 steps stay far below 1e-5, while a wrong scalar moves it by 1e-3 or more.
      CHECK(run_both(fused, pa, reference, pb, 30, seed) < 1e-5);

      // Checkpoint of the fused optimizer into torch::optim::AdamW and back: the same state.
      std::stringstream buf;
      {
        torch::serialize::OutputArchive out;
        fused.save(out);
        out.save_to(buf);
      }
      auto pc = leaves(std::vector<at::Tensor>{pa.begin(), pa.end()});
      torch::optim::AdamW restored(pc, options);
      {
        torch::serialize::InputArchive in;
        in.load_from(buf);
        restored.load(in);
      }
      auto pd = leaves(std::vector<at::Tensor>{pa.begin(), pa.end()});
      support::AtenFusedAdamW continued(pd, options);
      {
        std::stringstream buf2;
        torch::serialize::OutputArchive out;
        restored.save(out);
        out.save_to(buf2);
        torch::serialize::InputArchive in;
        in.load_from(buf2);
        continued.load(in);
      }
      // Step counts and moments came through: the next steps agree as before.
      CHECK(run_both(continued, pd, restored, pc, 10, seed + 1) < 1e-5);
    }
  }
}

TEST_CASE("AtenFusedAdamW: bf16 parameters, several dtypes in one group, sparse gradients refused") {
  if (!support::AtenFusedAdamW::available(c10::DeviceType::CPU)) return;
  const auto seed = test_seed();
  CAPTURE(seed);
  at::manual_seed(seed);
  auto f32 = at::randn({64, 64});
  std::vector<at::Tensor> pa{f32.clone().requires_grad_(true), f32.to(at::kBFloat16).requires_grad_(true)};
  std::vector<at::Tensor> pb{f32.clone().requires_grad_(true), f32.to(at::kBFloat16).requires_grad_(true)};
  support::AtenFusedAdamW fused(pa);
  torch::optim::AdamW reference(pb);
  // bf16 parameters keep bf16 state in both (torch::optim::AdamW's zeros_like): 8-bit
  // mantissas, so 5 steps agree within a few bf16 ulps (2^-8 = 4e-3 relative).
  const double worst = run_both(fused, pa, reference, pb, 5, seed);
  CHECK(worst < 2e-2);
  CHECK((pa[1].scalar_type() == at::kBFloat16));

  std::vector<at::Tensor> sparse{at::zeros({4}, at::requires_grad())};
  sparse[0].mutable_grad() = at::ones({4}).to_sparse();
  support::AtenFusedAdamW s(sparse);
  CHECK_THROWS_WITH_AS(s.step(), doctest::Contains("sparse"), c10::Error);
}

namespace {

Runtime& cpu_runtime(const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  static std::map<std::string, std::unique_ptr<Runtime>> runtimes;
  std::string key;
  for (const auto& [k, v] : extra) key += k + "=" + v + " ";
  auto& rt = runtimes[key];
  if (!rt) {
    ContextOptions o;
    o.settings.env = std::map<std::string, std::string>{};
    o.settings.cli = {{"device", "cpu"}, {"threads", "1"}};
    for (const auto& kv : extra) o.settings.cli.push_back(kv);
    o.loader.cli_paths = {ACCELKIT_TEST_PLUGIN_DIR};
    o.loader.read_environment = false;
    o.loader.include_default_dirs = false;
    rt = Runtime::start(o);
  }
  return *rt;
}

}  // namespace

TEST_CASE("the CPU plugin offers its kernel, and LibTorch's where LibTorch has one; the fastest is used and cached") {
  test::TempDir cache("accelkit-adamw-cache");
  test::ScopedEnv env("ACCELKIT_CACHE_DIR", cache.path().string());
  Runtime& rt = cpu_runtime();
  auto optimizers = rt.device_handle()->optimizer();
  REQUIRE(optimizers.ok());
  const auto impls = optimizers.value()->adamw_implementations();
  REQUIRE_FALSE(impls.empty());
  CHECK(impls.front().name.rfind("fused-", 0) == 0);
  CHECK(impls.front().master_weights);
  const bool aten = compat::aten_fused_adamw_available(c10::DeviceType::CPU);
  REQUIRE(impls.size() == (aten ? 2u : 1u));
  if (aten) {
    CHECK(impls[1].name == "aten-fused");
    CHECK_FALSE(impls[1].master_weights);
  }

  // Every offered implementation is created by name; an unknown name is refused with the list.
  for (const auto& i : impls) {
    std::vector<at::Tensor> p{at::zeros({8}, at::requires_grad())};
    AdamWConfig c;
    c.implementation = i.name;
    auto made = optimizers.value()->create_adamw(p, c);
    CHECK_MESSAGE(made.ok(), i.name);
  }
  AdamWConfig bad;
  bad.implementation = "no-such";
  std::vector<at::Tensor> p{at::zeros({8}, at::requires_grad())};
  auto refused = optimizers.value()->create_adamw(p, bad);
  REQUIRE_FALSE(refused.ok());
  CHECK(test::contains(refused.status().message(), impls.front().name));

  // The measured choice: one of the offer, with a timing for each, written to the cache (on a
  // machine that reads quiet: a timing taken while others took the cores is not cached) ...
  test::FakeProcStat quiet;
  const AdamWImplChoice first = choose_adamw_implementation(rt.context(), *optimizers.value(), c10::kCPU, true);
  if (!aten) {
    CHECK(first.origin == "only");
    return;
  }
  CHECK(first.origin == "benchmark");
  REQUIRE(first.median_ms.size() == 2);
  double best = 1e300;
  std::string fastest;
  for (const auto& [name, ms] : first.median_ms) {
    CHECK(ms > 0);
    if (ms < best) best = ms, fastest = name;
  }
  CHECK(first.name == fastest);  // never the slower one
  REQUIRE_FALSE(first.cache_file.empty());
  CHECK(std::filesystem::exists(first.cache_file));
  // ... read back without measuring ...
  const AdamWImplChoice again = choose_adamw_implementation(rt.context(), *optimizers.value(), c10::kCPU, true);
  CHECK(again.origin == "cache");
  CHECK(again.name == first.name);
  CHECK(again.median_ms == first.median_ms);
  const AdamWImplChoice looked_up = cached_adamw_implementation(rt.context(), *optimizers.value(), 1);
  CHECK(looked_up.origin == "cache");
  // ... and a damaged entry is measured again and rewritten.
  std::ofstream(first.cache_file) << "{ not json";
  const AdamWImplChoice redone = choose_adamw_implementation(rt.context(), *optimizers.value(), c10::kCPU, true);
  CHECK(redone.origin == "benchmark");
  CHECK(choose_adamw_implementation(rt.context(), *optimizers.value(), c10::kCPU, true).origin == "cache");

  // make_adamw uses it and says why; adamw_implementation pins one, or fails loudly.
  std::vector<at::Tensor> q{at::zeros({8}, at::requires_grad())};
  OptimizerChoice made = rt.make_adamw(q, {}, false);
  CHECK(test::contains(made.why, "fastest AdamW step"));
  OptimizerChoice pinned = cpu_runtime({{"adamw_implementation", "aten-fused"}}).make_adamw(q, {}, false);
  CHECK(test::contains(pinned.implementation, "at::_fused_adamw_"));
  CHECK(test::contains(pinned.why, "adamw_implementation = aten-fused"));
  CHECK_THROWS_WITH_AS(cpu_runtime({{"adamw_implementation", "no-such"}}).make_adamw(q, {}, false),
                       doctest::Contains("no AdamW implementation 'no-such'"), std::runtime_error);
}

}  // namespace aten_adamw_suite
