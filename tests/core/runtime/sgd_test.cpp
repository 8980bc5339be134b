// The CPU plugin's fused SGD against torch::optim::SGD on fresh random data (momentum,
// dampening, Nesterov, weight decay; params above the parallel grain, a strided param), against
// an fp64 replay of the same math, checkpoints both ways, and Runtime::make_sgd's choice.
// (autotune_test tunes an SGD program.)
#include <ATen/ATen.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>

#include "torch_doctest.hpp"

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "accelkit/runtime.hpp"
#include "cpu_runtime.hpp"
#include "fused_sgd.hpp"
#include "test_support.hpp"

namespace sgd_suite {

using namespace accelkit;
using accelkit::test::test_seed;
using torch::optim::SGDOptions;

namespace {

double max_rel(const at::Tensor& a, const at::Tensor& b) {
  const auto a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
  return ((a64 - b64).abs() / b64.abs().clamp_min(1e-3)).max().item<double>();
}

// Shapes: tiny, odd, above the 32K-element grain (parallel), and a transposed (strided) view.
std::vector<at::Tensor> make_params(std::uint64_t seed) {
  at::manual_seed(seed);
  std::vector<at::Tensor> out{at::randn({7}), at::randn({129, 33}), at::randn({300, 400}), at::randn({3, 5, 7})};
  out.push_back(at::randn({40, 30}).t());
  return out;
}

std::vector<at::Tensor> copies(const std::vector<at::Tensor>& ps) {
  std::vector<at::Tensor> out;
  for (const auto& p : ps) out.push_back(p.detach().clone());
  return out;
}

// The same random grads into every set of params, `steps` times, each optimizer stepping.
void run(std::vector<std::pair<torch::optim::Optimizer*, std::vector<at::Tensor>*>> runs, int steps, std::uint64_t seed) {
  at::manual_seed(seed);
  for (int s = 0; s < steps; ++s) {
    std::vector<at::Tensor> grads;
    for (const auto& p : *runs.front().second) grads.push_back(at::randn(p.sizes()));
    for (auto& [opt, ps] : runs) {
      for (std::size_t i = 0; i < ps->size(); ++i) (*ps)[i].mutable_grad() = grads[i].clone();
      opt->step();
    }
  }
}

double norm_rel(const at::Tensor& a, const at::Tensor& b) {
  const auto a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
  return (a64 - b64).norm().item<double>() / b64.norm().item<double>();
}

struct Case {
  std::string name;
  SGDOptions options;
};

std::vector<Case> cases() {
  return {{"plain", SGDOptions(0.05)},
          {"weight decay", SGDOptions(0.05).weight_decay(1e-2)},
          {"momentum + dampening + weight decay", SGDOptions(0.01).momentum(0.9).dampening(0.1).weight_decay(5e-4)},
          {"Nesterov + weight decay", SGDOptions(0.01).momentum(0.9).nesterov(true).weight_decay(1e-4)},
          {"pytorch/examples MNIST (momentum 0.5)", SGDOptions(0.01).momentum(0.5)}};
}

// fp64 replay of torch::optim::SGD's update.
void sgd64(std::vector<at::Tensor>& ps, std::vector<at::Tensor>& bufs, const std::vector<at::Tensor>& grads,
           const SGDOptions& o) {
  for (std::size_t i = 0; i < ps.size(); ++i) {
    at::Tensor d = grads[i].to(at::kDouble) + o.weight_decay() * ps[i];
    if (o.momentum() != 0) {
      bufs[i] = bufs[i].defined() ? bufs[i] * o.momentum() + (1 - o.dampening()) * d : d.clone();
      d = o.nesterov() ? d + o.momentum() * bufs[i] : bufs[i];
    }
    ps[i] = ps[i] - o.lr() * d;
  }
}

}  // namespace

TEST_CASE("fused SGD follows torch::optim::SGD for 50 steps and an fp64 replay of its math") {
  const std::uint64_t seed = test_seed();
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    auto base = make_params(seed);
    auto fused_p = copies(base), ref_p = copies(base);
    cpu::FusedSGD fused(fused_p, c.options);
    torch::optim::SGD ref(ref_p, c.options);
    run({{&fused, &fused_p}, {&ref, &ref_p}}, 50, seed + 1);
    CHECK(fused.unfused_last_step() == 1);  // the transposed view only
    double worst = 0;
    for (std::size_t i = 0; i < base.size(); ++i) worst = std::max(worst, max_rel(fused_p[i], ref_p[i]));
    MESSAGE(c.name << ": max relative difference from torch::optim::SGD after 50 steps " << worst
                   << " (" << fused.implementation() << ")");
    CHECK(worst <= 1e-5);  // float round-off of the same operations (0 where LibTorch fuses alike)
    if (c.options.momentum() != 0) {
      for (std::size_t i = 0; i < base.size(); ++i) {
        const auto& fb = static_cast<torch::optim::SGDParamState&>(
                             *fused.state().at(compat::optimizer_state_key(fused.state(), fused_p[i])))
                             .momentum_buffer();
        const auto& rb = static_cast<torch::optim::SGDParamState&>(
                             *ref.state().at(compat::optimizer_state_key(ref.state(), ref_p[i])))
                             .momentum_buffer();
        CHECK(max_rel(fb, rb) <= 1e-5);
      }
    }

    // fp64: the same grads, 20 steps.
    auto p32 = copies(base);
    cpu::FusedSGD f32(p32, c.options);
    std::vector<at::Tensor> p64, bufs(base.size());
    for (const auto& p : base) p64.push_back(p.to(at::kDouble));
    at::manual_seed(seed + 2);
    for (int s = 0; s < 20; ++s) {
      std::vector<at::Tensor> grads;
      for (const auto& p : base) grads.push_back(at::randn(p.sizes()));
      for (std::size_t i = 0; i < p32.size(); ++i) p32[i].mutable_grad() = grads[i].clone();
      f32.step();
      sgd64(p64, bufs, grads, c.options);
    }
    double worst64 = 0;
    for (std::size_t i = 0; i < base.size(); ++i) worst64 = std::max(worst64, norm_rel(p32[i], p64[i]));
    MESSAGE(c.name << ": relative difference (norm) from fp64 after 20 steps " << worst64);
    CHECK(worst64 <= 1e-6);  // 20 steps of float rounding (2^-24 each) stay well under it
  }
}

TEST_CASE("checkpoints move both ways between the fused SGD and torch::optim::SGD") {
  const std::uint64_t seed = test_seed();
  const SGDOptions o = SGDOptions(0.02).momentum(0.9).weight_decay(1e-3);
  auto base = make_params(seed);
  auto a_p = copies(base);
  cpu::FusedSGD a(a_p, o);
  run({{&a, &a_p}}, 5, seed + 3);
  std::stringstream saved;
  {
    torch::serialize::OutputArchive out;
    a.save(out);
    out.save_to(saved);
  }
  // Load the fused optimizer's state into torch::optim::SGD, and continue both.
  auto b_p = copies(a_p);
  torch::optim::SGD b(b_p, o);
  {
    torch::serialize::InputArchive in;
    in.load_from(saved);
    b.load(in);
  }
  run({{&a, &a_p}, {&b, &b_p}}, 10, seed + 4);
  for (std::size_t i = 0; i < base.size(); ++i) CHECK(max_rel(a_p[i], b_p[i]) <= 1e-5);

  // And torch::optim::SGD's state into the fused one: the buffers carry on, not restart.
  std::stringstream back;
  {
    torch::serialize::OutputArchive out;
    b.save(out);
    out.save_to(back);
  }
  auto c_p = copies(b_p);
  cpu::FusedSGD c(c_p, o);
  {
    torch::serialize::InputArchive in;
    in.load_from(back);
    c.load(in);
  }
  auto fresh_p = copies(b_p);
  cpu::FusedSGD fresh(fresh_p, o);  // no state: its first step restarts the buffers
  run({{&b, &b_p}, {&c, &c_p}, {&fresh, &fresh_p}}, 3, seed + 5);
  double restart = 0;
  for (std::size_t i = 0; i < base.size(); ++i) {
    CHECK(max_rel(c_p[i], b_p[i]) <= 1e-5);
    restart = std::max(restart, max_rel(fresh_p[i], b_p[i]));
  }
  CHECK(restart > 1e-3);  // the comparison can tell a loaded state from none
}

namespace {

Runtime& cpu_runtime(const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  static std::map<std::string, std::unique_ptr<Runtime>> runtimes;
  std::string key;
  for (const auto& [k, v] : extra) key += k + "=" + v + " ";
  auto& rt = runtimes[key];
  if (!rt) {
    std::vector<std::pair<std::string, std::string>> cli{{"threads", "1"}};
    cli.insert(cli.end(), extra.begin(), extra.end());
    rt = accelkit::test::start_cpu_runtime(std::move(cli));
  }
  return *rt;
}

}  // namespace

TEST_CASE("Runtime::make_sgd: the plugin's fused SGD, torch::optim::SGD with the reason, a loud 'on'") {
  Runtime& rt = cpu_runtime();
  CHECK(rt.device_handle()->info().capabilities.has(Capability::fused_sgd));
  std::vector<at::Tensor> q{at::randn({64, 8}).requires_grad_()};
  const SGDConfig c{0.01, 0.9, 0, 1e-4, true};
  OptimizerChoice made = rt.make_sgd(q, c);
  CHECK(test::contains(made.implementation, "fused SGD"));
  CHECK(test::contains(made.why, "has a fused SGD"));
  REQUIRE(dynamic_cast<torch::optim::SGD*>(made.optimizer.get()) != nullptr);
  const auto& o = static_cast<const SGDOptions&>(made.optimizer->param_groups().front().options());
  CHECK(o.momentum() == 0.9);
  CHECK(o.nesterov());
  CHECK(o.weight_decay() == 1e-4);

  OptimizerChoice off = cpu_runtime({{"fused_optimizer", "off"}}).make_sgd(q, c);
  CHECK(off.implementation == "torch::optim::SGD");
  CHECK(test::contains(off.why, "fused_optimizer = off"));

  // Nesterov without momentum is SGD's own error, not a fallback.
  CHECK_THROWS(rt.make_sgd(q, SGDConfig{0.01, 0, 0, 0, true}));
}

}  // namespace sgd_suite
