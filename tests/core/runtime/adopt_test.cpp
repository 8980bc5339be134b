// The program's own optimizer taken by the runtime (Runtime::prepare(module, optimizer),
// Runtime::step): torch::optim::Adam, AdamW and SGD stepped with the CPU plugin's fused update on
// their own param groups, options and state, against the same optimizer stepped by LibTorch on
// fresh random data; checkpoints both ways; a learning-rate schedule; what steps as it is, and
// what is refused.
#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/schedulers/step_lr.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>

#include "torch_doctest.hpp"

#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "accelkit/runtime.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "cpu_runtime.hpp"
#include "test_support.hpp"

namespace adopt_suite {

using namespace accelkit;
using accelkit::test::test_seed;

namespace {

// Two networks with the same weights: one for the runtime, one for the reference.
torch::nn::Sequential make_net(std::uint64_t seed) {
  torch::manual_seed(seed);
  // 300 x 130 is above the fused kernel's per-thread grain.
  return torch::nn::Sequential(torch::nn::Linear(48, 300), torch::nn::ReLU(), torch::nn::Linear(300, 130),
                               torch::nn::ReLU(), torch::nn::Linear(130, 5));
}

double max_rel(const at::Tensor& a, const at::Tensor& b) {
  const auto a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
  return ((a64 - b64).abs() / b64.abs().clamp_min(1e-3)).max().item<double>();
}

double max_rel(torch::nn::Sequential& a, torch::nn::Sequential& b) {
  double worst = 0;
  const auto pa = a->parameters(), pb = b->parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) worst = std::max(worst, max_rel(pa[i], pb[i]));
  return worst;
}

// One step of `net`'s optimizer on gradients drawn from `seed` alone, the same for two nets
// whatever their weights: a comparison then sees the optimizers' rounding only (a network's
// gradients would amplify it over the steps). `step` steps the optimizer.
void train_step(torch::nn::Sequential& net, torch::optim::Optimizer& opt, std::uint64_t seed,
                const std::function<void()>& step) {
  opt.zero_grad();
  at::manual_seed(seed);
  for (auto& p : net->parameters()) p.mutable_grad() = at::randn_like(p) * 0.1;
  step();
}

Runtime& cpu_runtime(const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  static std::map<std::string, std::unique_ptr<Runtime>> runtimes;
  std::string key;
  for (const auto& [k, v] : extra) key += k + "=" + v + " ";
  auto& rt = runtimes[key];
  if (!rt) {
    // fp32: the comparison is of the optimizers (the nets run outside Runtime::autocast() here).
    std::vector<std::pair<std::string, std::string>> cli{{"threads", "2"}, {"precision", "fp32"}};
    cli.insert(cli.end(), extra.begin(), extra.end());
    rt = accelkit::test::start_cpu_runtime(std::move(cli));
  }
  return *rt;
}

// Steps `mine` through the runtime and `ref` through LibTorch for `steps` steps on the same
// fresh random batches; returns the largest relative difference of the weights at the end.
template <class Opt>
double run_both(Runtime& rt, torch::nn::Sequential& a, Opt& mine, torch::nn::Sequential& b, Opt& ref, int steps,
                std::uint64_t seed) {
  at::manual_seed(seed);
  for (int s = 0; s < steps; ++s) {
    const std::uint64_t g = seed * 31 + static_cast<std::uint64_t>(s);
    train_step(a, mine, g, [&] { rt.step(mine); });
    train_step(b, ref, g, [&] { ref.step(); });
  }
  return max_rel(a, b);
}

// A CPU runtime with step tuning observing (the defaults: the plan's and fewer threads at
// least, on a 2-core machine); null, after saying why the case is skipped, where it has nothing
// to choose.
std::unique_ptr<accelkit::Runtime> observing_runtime() {
  auto rt = accelkit::test::start_cpu_runtime({{"autotune_cache", "false"}});
  if (rt->step_tuning().state == StepTuningStatus::State::observing) return rt;
  MESSAGE("skipped: step tuning has nothing to choose here (" << rt->step_tuning().why << ")");
  return nullptr;
}

}  // namespace

TEST_CASE("Adam with L2 decay, amsgrad and two param groups: the fused step follows torch::optim::Adam") {
  const auto seed = test_seed();
  INFO("seed " << seed);
  for (const bool amsgrad : {false, true}) {
    auto a = make_net(seed), b = make_net(seed), untouched = make_net(seed);
    auto groups = [&](torch::nn::Sequential& n) {
      std::vector<torch::optim::OptimizerParamGroup> g;
      g.emplace_back(n[0]->parameters(), std::make_unique<torch::optim::AdamOptions>(
                                             torch::optim::AdamOptions(1e-3).weight_decay(0.05).amsgrad(amsgrad)));
      std::vector<at::Tensor> rest = n[2]->parameters();
      for (const auto& p : n[4]->parameters()) rest.push_back(p);
      g.emplace_back(rest, std::make_unique<torch::optim::AdamOptions>(
                               torch::optim::AdamOptions(3e-3).betas({0.5, 0.99}).amsgrad(amsgrad)));
      return g;
    };
    torch::optim::Adam mine(groups(a)), ref(groups(b));
    Runtime& rt = cpu_runtime();
    const Adoption adopted = rt.prepare(*a, mine);
    CHECK(adopted.optimizer == "torch::optim::Adam");
    CHECK(adopted.fused);
    CHECK(test::contains(adopted.implementation, "on the optimizer's own state"));
    CHECK(run_both(rt, a, mine, b, ref, 20, seed) <= 1e-4);
    CHECK(max_rel(a, untouched) > 1e-2);  // the comparison can tell a stepped net from none
    // The state is the optimizer's own, in torch::optim::Adam's types.
    const auto& st = mine.state();
    REQUIRE(st.size() == 6);
    for (const auto& [key, s] : st) {
      const auto* as = dynamic_cast<const torch::optim::AdamParamState*>(s.get());
      REQUIRE(as != nullptr);
      CHECK(as->step() == 20);
      CHECK(as->max_exp_avg_sq().defined() == amsgrad);
    }
  }
}

TEST_CASE("AdamW and SGD with Nesterov momentum: the fused step follows torch::optim's") {
  const auto seed = test_seed();
  INFO("seed " << seed);
  Runtime& rt = cpu_runtime();
  {
    auto a = make_net(seed), b = make_net(seed);
    torch::optim::AdamW mine(a->parameters(), torch::optim::AdamWOptions(2e-3).weight_decay(0.1));
    torch::optim::AdamW ref(b->parameters(), torch::optim::AdamWOptions(2e-3).weight_decay(0.1));
    CHECK(rt.prepare(*a, mine).fused);
    CHECK(run_both(rt, a, mine, b, ref, 15, seed + 1) <= 1e-4);
  }
  {
    auto a = make_net(seed), b = make_net(seed);
    auto o = torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-3);
    torch::optim::SGD mine(a->parameters(), o), ref(b->parameters(), o);
    const Adoption adopted = rt.prepare(*a, mine);
    CHECK(adopted.fused);
    CHECK(test::contains(adopted.implementation, "fused SGD"));
    CHECK(run_both(rt, a, mine, b, ref, 15, seed + 2) <= 1e-5);
  }
}

TEST_CASE("a learning-rate schedule on the optimizer's options is followed") {
  const auto seed = test_seed();
  auto a = make_net(seed), b = make_net(seed), fixed = make_net(seed);
  torch::optim::Adam mine(a->parameters(), torch::optim::AdamOptions(1e-2));
  torch::optim::Adam ref(b->parameters(), torch::optim::AdamOptions(1e-2));
  torch::optim::Adam no_schedule(fixed->parameters(), torch::optim::AdamOptions(1e-2));
  Runtime& rt = cpu_runtime();
  rt.prepare(*a, mine);
  torch::optim::StepLR sched_a(mine, 3, 0.1), sched_b(ref, 3, 0.1);
  at::manual_seed(seed);
  for (int s = 0; s < 10; ++s) {
    const std::uint64_t g = seed * 31 + static_cast<std::uint64_t>(s);
    train_step(a, mine, g, [&] { rt.step(mine); });
    train_step(b, ref, g, [&] { ref.step(); });
    train_step(fixed, no_schedule, g, [&] { no_schedule.step(); });
    sched_a.step();
    sched_b.step();
  }
  CHECK(max_rel(a, b) <= 1e-4);
  CHECK(max_rel(a, fixed) > 1e-3);  // the schedule changed the result
}

TEST_CASE("checkpoints move both ways between an adopted Adam and torch::optim::Adam") {
  const auto seed = test_seed();
  Runtime& rt = cpu_runtime();
  auto a = make_net(seed), b = make_net(seed);
  torch::optim::Adam mine(a->parameters(), torch::optim::AdamOptions(1e-3));
  torch::optim::Adam ref(b->parameters(), torch::optim::AdamOptions(1e-3));
  rt.prepare(*a, mine);
  run_both(rt, a, mine, b, ref, 5, seed);
  // The adopted one's checkpoint into a fresh torch::optim::Adam, and the reference's into a
  // fresh adopted one: both continue as the originals do.
  auto c = make_net(seed + 7), d = make_net(seed + 7);
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < c->parameters().size(); ++i) {
      c->parameters()[i].copy_(a->parameters()[i]);
      d->parameters()[i].copy_(b->parameters()[i]);
    }
  }
  torch::optim::Adam from_mine(c->parameters(), torch::optim::AdamOptions(1e-3));
  torch::optim::Adam from_ref(d->parameters(), torch::optim::AdamOptions(1e-3));
  std::stringstream s1, s2;
  torch::save(mine, s1);
  torch::load(from_mine, s1);
  torch::save(ref, s2);
  torch::load(from_ref, s2);
  rt.prepare(*d, from_ref);
  at::manual_seed(seed + 3);
  for (int s = 0; s < 5; ++s) {
    const std::uint64_t g = seed * 37 + static_cast<std::uint64_t>(s);
    train_step(a, mine, g, [&] { rt.step(mine); });
    train_step(c, from_mine, g, [&] { from_mine.step(); });
    train_step(b, ref, g, [&] { ref.step(); });
    train_step(d, from_ref, g, [&] { rt.step(from_ref); });
  }
  CHECK(max_rel(a, c) <= 1e-4);
  CHECK(max_rel(b, d) <= 1e-4);
  for (const auto& [key, st] : from_ref.state()) CHECK(static_cast<const torch::optim::AdamParamState&>(*st).step() == 10);
}

TEST_CASE("what steps as it is: RMSprop, a subclass, fused_optimizer = off; what is refused") {
  Runtime& rt = cpu_runtime();
  auto net = make_net(test_seed());
  torch::optim::RMSprop rms(net->parameters(), torch::optim::RMSpropOptions(1e-3));
  const Adoption r = rt.prepare(*net, rms);
  CHECK_FALSE(r.fused);
  CHECK(r.implementation == "torch::optim::RMSprop, as it is");
  CHECK(test::contains(r.why, "no fused implementation"));
  const std::uint64_t g = test_seed() + 5;
  const auto before = net->parameters()[0].clone();
  train_step(net, rms, g, [&] { rt.step(rms); });
  CHECK_FALSE(at::equal(before, net->parameters()[0]));

  struct MyAdam : torch::optim::Adam {
    using torch::optim::Adam::Adam;
  };
  MyAdam mine(net->parameters(), torch::optim::AdamOptions(1e-3));
  const Adoption s = rt.prepare(*net, mine);
  CHECK_FALSE(s.fused);
  CHECK(test::contains(s.optimizer, "a subclass of torch::optim::Adam"));

  torch::optim::Adam off(net->parameters(), torch::optim::AdamOptions(1e-3));
  const Adoption o = cpu_runtime({{"fused_optimizer", "off"}}).prepare(*net, off);
  CHECK_FALSE(o.fused);
  CHECK(test::contains(o.why, "fused_optimizer = off"));

  // A schedule that switches amsgrad mid-run: loud, not ignored.
  torch::optim::Adam ams(net->parameters(), torch::optim::AdamOptions(1e-3));
  rt.prepare(*net, ams);
  train_step(net, ams, g, [&] { rt.step(ams); });
  static_cast<torch::optim::AdamOptions&>(ams.param_groups()[0].options()).amsgrad(true);
  CHECK_THROWS_WITH_AS(rt.step(ams), doctest::Contains("switched amsgrad on"), std::invalid_argument);

  // An optimizer never given to prepare() is taken on its first step.
  torch::optim::Adam later(net->parameters(), torch::optim::AdamOptions(1e-3));
  train_step(net, later, g + 1, [&] { rt.step(later); });
  CHECK(later.state().size() == net->parameters().size());
}

TEST_CASE("with Runtime::step, a training step for step tuning is one optimizer step, whatever scopes it holds") {
  auto rt = observing_runtime();
  if (!rt) return;  // said why
  auto net = make_net(test_seed());
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-3));
  rt->prepare(*net, opt);
  const int iterations = 6;
  for (int i = 0; i < iterations; ++i) {
    opt.zero_grad();
    // Three forwards a step, as a GAN's: each scope of one step runs with one configuration
    // (the first step's too: a tensor made in one scope meets the next in its dtype).
    std::vector<std::pair<bool, int>> seen;
    at::Tensor loss = at::zeros({});
    for (int k = 0; k < 3; ++k) {
      at::Tensor out;
      {
        auto ac = rt->autocast();
        seen.emplace_back(compat::autocast_enabled(c10::DeviceType::CPU), at::get_num_threads());
        out = net->forward(at::randn({8, 48}));
      }
      loss = loss + at::mse_loss(out.to(at::kFloat), at::randn({8, 5}));
    }
    loss.backward();
    rt->step(opt);
    for (const auto& s : seen) CHECK(s == seen.front());
  }
  // The first scope began the first step; the second optimizer step (the order seen) and each
  // after it began the next.
  CHECK(rt->step_tuning().steps_seen == iterations);
}

TEST_CASE("a loop whose autocast() guard is held over Runtime::step: each optimizer step still ends a step") {
  auto rt = observing_runtime();
  if (!rt) return;  // said why
  auto net = make_net(test_seed());
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-3));
  rt->prepare(*net, opt);
  const int iterations = 12;
  for (int i = 0; i < iterations; ++i) {
    auto ac = rt->autocast();  // the guard at the top of the loop's body, alive until its end
    const auto threads = at::get_num_threads();
    const bool autocast = compat::autocast_enabled(c10::DeviceType::CPU);
    opt.zero_grad();
    at::mse_loss(net->forward(at::randn({8, 48})).to(at::kFloat), at::randn({8, 5})).backward();
    rt->step(opt);
    CHECK(at::get_num_threads() == threads);  // nothing changed under the open scope
    CHECK(compat::autocast_enabled(c10::DeviceType::CPU) == autocast);
  }
  // As with the step outside the scope: the first scope began the first step, the second
  // optimizer step (the order seen) ended it, and each later one its own; the last step's end
  // is taken when the next scope opens. Not "each scope is a step" after 64 scopes.
  CHECK(rt->step_tuning().steps_seen == iterations - 1);
}

TEST_CASE("two optimizers stepped in turn (a GAN's D, then G): a tensor made before D's step meets G's forward") {
  auto rt = observing_runtime();
  if (!rt) return;  // said why
  torch::manual_seed(static_cast<std::uint64_t>(test_seed()));
  torch::nn::Linear gen(16, 48);
  auto dis = make_net(test_seed() + 1);
  torch::optim::Adam gopt(gen->parameters(), torch::optim::AdamOptions(2e-4));
  torch::optim::Adam dopt(dis->parameters(), torch::optim::AdamOptions(2e-4));
  rt->prepare(*gen, gopt);
  rt->prepare(*dis, dopt);
  auto scoped = [&](auto&& f) {
    auto ac = rt->autocast();
    return f();
  };
  const int iterations = 30;  // candidates change turns within these
  for (int i = 0; i < iterations; ++i) {
    dopt.zero_grad();
    auto real = scoped([&] { return dis->forward(at::randn({8, 48})); });
    auto fake = scoped([&] { return gen->forward(at::randn({8, 16})); });  // kept past D's step
    auto on_fake = scoped([&] { return dis->forward(fake.detach()); });
    (at::mse_loss(real.to(at::kFloat), at::ones({8, 5})) + at::mse_loss(on_fake.to(at::kFloat), at::zeros({8, 5})))
        .backward();
    rt->step(dopt);
    gopt.zero_grad();
    auto on_fake_g = scoped([&] { return dis->forward(fake); });  // G's images in the step's dtype
    at::mse_loss(on_fake_g.to(at::kFloat), at::ones({8, 5})).backward();
    rt->step(gopt);
  }
  // G's steps end the steps once the order is seen (D, G, then D again).
  CHECK(rt->step_tuning().steps_seen == iterations);
}

}  // namespace adopt_suite
