#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>

#include <torch/torch.h>

#include "accelkit/autotune.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/train.hpp"
#include "test_support.hpp"

#include "torch_doctest.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace autotune_suite {

using namespace accelkit;
using accelkit::test::ScopedEnv;
using accelkit::test::TempDir;
namespace fs = std::filesystem;

namespace {

TuneTrial trial(const std::string& precision, const std::string& fused, double ms, std::vector<double> losses,
                bool reference = false) {
  TuneTrial t;
  t.candidate = {dtype_from_string(precision).value(), fused == "on", 2};
  t.reference = reference;
  t.eligible = true;
  t.median_ms = ms;
  t.losses = std::move(losses);
  return t;
}

std::unique_ptr<Runtime> start(std::vector<std::pair<std::string, std::string>> cli = {}) {
  ContextOptions o;
  o.settings.env = std::map<std::string, std::string>{};
  cli.insert(cli.begin(), {{"device", "cpu"}, {"profile", "auto"}});
  o.settings.cli = std::move(cli);
  o.loader.cli_paths = {ACCELKIT_TEST_PLUGIN_DIR};
  o.loader.read_environment = false;
  o.loader.include_default_dirs = false;
  return Runtime::start(o);
}

// A small MLP and one batch; the same weights every time it is built.
struct Problem {
  torch::nn::Sequential net{torch::nn::Linear(64, 64), torch::nn::ReLU(), torch::nn::Linear(64, 8)};
  TuneProblem p;
  explicit Problem(Runtime& rt) {
    torch::manual_seed(3);
    net = torch::nn::Sequential(torch::nn::Linear(64, 64), torch::nn::ReLU(), torch::nn::Linear(64, 8));
    rt.prepare(*net);
    p.name = "test mlp";
    p.model = net.ptr().get();
    p.forward = [this](const at::Tensor& x) { return net->forward(x); };
    p.loss = [](const at::Tensor& y, const at::Tensor& t) { return torch::mse_loss(y, t); };
    p.input = torch::randn({32, 64});
    p.target = torch::randn({32, 8});
  }
};

TuneOptions quick() {
  TuneOptions o;
  o.warmup = 1;
  o.steps = 2;
  return o;
}

// The runtime's decision for `key`, or nullptr.
const RuntimeDecision* decision(const Runtime& rt, const std::string& key) {
  for (const auto& d : rt.context().decisions())
    if (d.key == key) return &d;
  return nullptr;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("choose_candidate: the fastest that stays close to fp32") {
  std::vector<TuneTrial> trials{trial("fp32", "off", 100, {1.0, 0.9, 0.8}, true),
                                trial("fp32", "on", 60, {1.0, 0.9, 0.8}),
                                trial("bf16", "on", 30, {1.001, 0.905, 0.806}),
                                trial("bf16", "off", 20, {1.0, 0.95, 1.2})};
  const TuneCandidate c = choose_candidate(trials, 2e-2, 1e-3);
  CHECK(c == TuneCandidate{Dtype::bf16, true, 2});
  CHECK(trials[2].accepted);
  CHECK(trials[2].note == "fastest that passed");
  CHECK_FALSE(trials[3].accepted);  // faster, but its loss drifted 50% from fp32's
  CHECK(trials[3].note.find("loss off fp32's by 0.5") != std::string::npos);
  CHECK(trials[0].accepted);
  CHECK(trials[0].rel_diff == 0);
  CHECK(trials[2].rel_diff == doctest::Approx(0.0075).epsilon(1e-6));
}

TEST_CASE("choose_candidate: non-finite, ineligible and failed trials are never chosen") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<TuneTrial> trials{trial("fp32", "off", 100, {1.0, 0.9}, true), trial("bf16", "on", 10, {1.0, nan}),
                                trial("bf16", "off", 20, {1.0, 0.9}), trial("fp32", "on", 5, {})};
  trials[2].eligible = false;
  trials[3].note = "failed: boom";
  CHECK(choose_candidate(trials, 2e-2, 1e-3) == TuneCandidate{Dtype::fp32, false, 2});
  CHECK(trials[1].note == "loss not finite at step 2");
  CHECK(trials[2].note == "not allowed by the settings you fixed");
  CHECK(trials[3].note == "failed: boom");
  CHECK_FALSE(trials[3].accepted);
}

TEST_CASE("choose_candidate: a diverging reference or no passing candidate is an error") {
  std::vector<TuneTrial> diverge{trial("fp32", "off", 100, {1.0, std::numeric_limits<double>::infinity()}, true)};
  CHECK_THROWS_WITH_AS(choose_candidate(diverge, 2e-2, 1e-3), doctest::Contains("diverges"), std::runtime_error);
  std::vector<TuneTrial> none{trial("fp32", "off", 100, {1.0, 0.9}, true), trial("bf16", "on", 10, {1.0, 2.0})};
  none[0].eligible = false;
  CHECK_THROWS_WITH_AS(choose_candidate(none, 2e-2, 1e-3), doctest::Contains("bf16, fused AdamW, 2 threads"),
                       std::runtime_error);
  std::vector<TuneTrial> no_ref{trial("bf16", "on", 10, {1.0})};
  CHECK_THROWS_AS(choose_candidate(no_ref, 2e-2, 1e-3), std::runtime_error);
}

TEST_CASE("autotune: times the candidates, applies the choice, restores the model, then reads the cache") {
  TempDir cache;
  ScopedEnv env("ACCELKIT_CACHE_DIR", cache.str());
  accelkit::test::FakeProcStat quiet;  // trials timed on a busy machine would not be cached
  auto rt = start();
  Problem prob(*rt);
  std::vector<at::Tensor> before;
  for (const auto& p : prob.net->parameters()) before.push_back(p.detach().clone());

  const TuneDecision d = autotune(*rt, prob.p, quick());
  CHECK(d.origin == "benchmark");
  REQUIRE(d.trials.size() >= 2);  // fp32 reference + fused at least (the CPU plugin has one)
  CHECK(d.trials.front().reference);
  CHECK(d.trials.front().candidate.precision == Dtype::fp32);
  CHECK(d.trials.front().losses.size() == 3);
  CHECK(std::count_if(d.trials.begin(), d.trials.end(), [](const TuneTrial& t) { return t.accepted; }) >= 1);
  CHECK(fs::exists(d.cache_file));
  CHECK(d.cache_file.rfind(cache.str(), 0) == 0);

  // Tuning leaves the model as it was and no gradients behind - in fp32 too, although profile
  // auto's master weights made the bf16 + fused trial's parameters bf16.
  CHECK(rt->context().settings().text("master_weights") == "on");
  const auto after = prob.net->parameters();
  for (std::size_t i = 0; i < after.size(); ++i) {
    CHECK((after[i].scalar_type() == at::kFloat));
    CHECK(torch::equal(after[i], before[i]));
    CHECK_FALSE(after[i].grad().defined());
  }
  // The choice is now the runtime's, recorded beside the settings, which stay as resolved.
  const Settings& s = rt->context().settings();
  CHECK(s.text("precision") == "auto");
  CHECK(s.get("precision").origin == Origin::default_value);
  const auto& decisions = rt->context().decisions();
  const auto precision = std::find_if(decisions.begin(), decisions.end(),
                                      [](const RuntimeDecision& r) { return r.key == "precision"; });
  REQUIRE(precision != decisions.end());
  CHECK(precision->value == to_string(d.chosen.precision));
  CHECK(precision->source.find("autotune") != std::string::npos);
  CHECK(rt->precision().dtype == d.chosen.precision);
  // The bf16 + fused trial turned the weights bf16 for its steps; that is no decision of the run.
  CHECK(std::none_of(decisions.begin(), decisions.end(), [](const RuntimeDecision& r) { return r.key == "master_weights"; }));
  CHECK(rt->make_adamw(prob.net->parameters(), {}).implementation.find(d.chosen.fused ? "fused" : "torch") !=
        std::string::npos);

  // A second runtime: the same key, now from the cache, no trials run.
  auto rt2 = start();
  Problem prob2(*rt2);
  const TuneDecision c = autotune(*rt2, prob2.p, quick());
  CHECK(c.origin == "cache");
  CHECK(c.key == d.key);
  CHECK(c.chosen == d.chosen);
  // The runtime's own decisions at start (malloc_reuse) come first, then the cached tuning.
  const auto& made = rt2->context().decisions();
  CHECK(std::any_of(made.begin(), made.end(),
                    [&](const RuntimeDecision& r) { return r.source == "autotune cache " + d.cache_file; }));
  const auto listed = list_autotune_cache(cache.str());
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].model == d.model);

  // Another model shape is another entry.
  auto rt3 = start();
  Problem prob3(*rt3);
  prob3.p.input = torch::randn({16, 64});
  prob3.p.target = torch::randn({16, 8});
  CHECK(autotune(*rt3, prob3.p, quick()).origin == "benchmark");
  CHECK(list_autotune_cache(cache.str()).size() == 2);
}

TEST_CASE("autotune: an SGD program's trials time the fused SGD against torch::optim::SGD; make_sgd follows") {
  TempDir cache;
  ScopedEnv env("ACCELKIT_CACHE_DIR", cache.str());
  accelkit::test::FakeProcStat quiet;  // trials timed on a busy machine would not be cached
  auto rt = start();
  Problem prob(*rt);
  prob.p.sgd = SGDConfig{0.01, 0.5};
  const TuneDecision d = autotune(*rt, prob.p, quick());
  CHECK(d.origin == "benchmark");
  REQUIRE(d.trials.size() >= 2);
  for (const TuneTrial& t : d.trials) CHECK(t.candidate.label().find("SGD") != std::string::npos);
  CHECK(std::any_of(d.trials.begin(), d.trials.end(), [](const TuneTrial& t) { return t.candidate.fused; }));
  CHECK(d.model.find("SGD momentum 0.5") != std::string::npos);
  const OptimizerChoice opt = rt->make_sgd(prob.net->parameters(), *prob.p.sgd);
  CHECK(opt.implementation.find(d.chosen.fused ? "fused SGD" : "torch::optim::SGD") != std::string::npos);

  // The same model with AdamW is another decision; the SGD one comes back from the cache.
  auto rt2 = start();
  Problem prob2(*rt2);
  CHECK(autotune(*rt2, prob2.p, quick()).origin == "benchmark");
  auto rt3 = start();
  Problem prob3(*rt3);
  prob3.p.sgd = SGDConfig{0.01, 0.5};
  const TuneDecision again = autotune(*rt3, prob3.p, quick());
  CHECK(again.origin == "cache");
  CHECK(again.chosen.label() == d.chosen.label());
  CHECK(list_autotune_cache(cache.str()).size() == 2);
}

TEST_CASE("autotune: a corrupt or stale entry is ignored, re-tuned and rewritten") {
  TempDir cache;
  ScopedEnv env("ACCELKIT_CACHE_DIR", cache.str());
  accelkit::test::FakeProcStat quiet;  // trials timed on a busy machine would not be cached
  std::string path;
  {
    auto rt = start();
    Problem prob(*rt);
    path = autotune(*rt, prob.p, quick()).cache_file;
  }
  const std::string good = slurp(path);
  const std::vector<std::pair<const char*, std::string>> damage{
      {"not JSON", "{\"format\": 1, \"key\": "},
      {"another format", std::string(good).replace(good.find("\"format\": 1"), 11, "\"format\": 99")},
      {"bad value", std::string(good).replace(good.find("\"precision\": \""), 14, "\"precision\": \"x")},
      {"stale versions", std::string(good).replace(good.find("\"versions\": \"accelkit "), 22, "\"versions\": \"accelkit 0")},
  };
  for (const auto& [what, text] : damage) {
    CAPTURE(what);
    { std::ofstream(path, std::ios::trunc) << text; }
    auto rt = start();
    Problem prob(*rt);
    const TuneDecision d = autotune(*rt, prob.p, quick());
    CHECK(d.origin == "benchmark");
    CHECK(d.cache_file == path);
    const auto listed = list_autotune_cache(cache.str());
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].origin == "cache");  // readable again
    CHECK(listed[0].versions == d.versions);
  }
  // list_autotune_cache reports what it cannot read.
  { std::ofstream(path, std::ios::trunc) << "[]"; }
  const auto listed = list_autotune_cache(cache.str());
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].origin == "corrupt");
  CHECK_FALSE(listed[0].why.empty());
}

TEST_CASE("autotune: --no-cache neither reads nor writes; fixed settings are kept; off tunes nothing") {
  TempDir cache;
  ScopedEnv env("ACCELKIT_CACHE_DIR", cache.str());
  accelkit::test::FakeProcStat quiet;  // trials timed on a busy machine would not be cached
  {
    auto rt = start({{"autotune_cache", "false"}});
    Problem prob(*rt);
    const TuneDecision d = autotune(*rt, prob.p, quick());
    CHECK(d.origin == "benchmark");
    CHECK(d.cache_file.empty());
    CHECK(list_autotune_cache(cache.str()).empty());
    CHECK(rt->context().settings().get("autotune_cache").source == "--no-cache");
  }
  {
    auto rt = start({{"precision", "fp32"}});
    Problem prob(*rt);
    const TuneDecision d = autotune(*rt, prob.p, quick());
    CHECK(d.chosen.precision == Dtype::fp32);
    for (const auto& t : d.trials) CHECK(t.candidate.precision == Dtype::fp32);
    CHECK(rt->context().settings().get("precision").origin == Origin::cli);
  }
  {
    auto rt = start({{"profile", "balanced"}});
    Problem prob(*rt);
    const TuneDecision d = autotune(*rt, prob.p, quick());
    CHECK(d.origin == "settings");
    CHECK(d.trials.empty());
    CHECK(d.why.find("autotune is off") != std::string::npos);
  }
  {
    auto rt = start();
    Problem prob(*rt);
    prob.p.model = nullptr;
    CHECK_THROWS_AS(autotune(*rt, prob.p), std::invalid_argument);
  }
}

TEST_CASE("Runtime: an explicit sdpa_backend is honoured exactly or refused") {
  if (compat::kSdpaControllable) {
    // The CPU has no flash kernel: asking for it must fail, not fall back to math.
    CHECK_THROWS_WITH_AS(start({{"sdpa_backend", "flash"}}), doctest::Contains("has no flash attention"),
                         DeviceUnavailableError);
    auto rt = start({{"sdpa_backend", "math"}});
    const auto b = compat::sdpa_backends();
    CHECK(b.math);
    CHECK_FALSE(b.flash);
    CHECK_FALSE(b.mem_efficient);
  } else {
    CHECK_THROWS_WITH_AS(start({{"sdpa_backend", "math"}}), doctest::Contains("no scaled-dot-product attention"),
                         DeviceUnavailableError);
  }
  CHECK_NOTHROW(start({{"sdpa_backend", "auto"}}));
}

TEST_CASE("Runtime: a profile's tf32 = on is skipped with a reason on a device without TF32") {
  auto rt = start({{"profile", "maximum_performance"}});
  // The setting stays the profile's; the runtime's decision is recorded beside it.
  const Effective& tf32 = rt->context().settings().get("tf32");
  CHECK(format_value(tf32.value) == "on");
  CHECK(tf32.origin == Origin::profile);
  const RuntimeDecision* found = decision(*rt, "tf32");
  REQUIRE(found != nullptr);
  const RuntimeDecision& d = *found;
  CHECK(d.value == "auto");
  CHECK(d.why.find("has no TF32") != std::string::npos);
  CHECK_FALSE(rt->precision().tf32);
  // The user's own tf32 = on is refused loudly instead.
  CHECK_THROWS_AS(start({{"tf32", "on"}}), DeviceUnavailableError);
}

TEST_CASE("autotune: the trainer tunes under profile auto, then trains with the choice") {
  TempDir cache;
  ScopedEnv env("ACCELKIT_CACHE_DIR", cache.str());
  accelkit::test::FakeProcStat quiet;  // trials timed on a busy machine would not be cached
  auto rt = start();
  TrainConfig c;
  c.steps = 12;
  c.batch_size = 32;
  c.width = 32;
  c.depth = 2;
  c.outputs = 4;
  c.log_every = 6;
  c.checkpoint_dir = "";
  Trainer trainer(*rt, c);
  REQUIRE(last_tune_decision(*rt));
  CHECK(last_tune_decision(*rt)->origin == "benchmark");
  CHECK(last_tune_decision(*rt)->model.rfind("train MLP", 0) == 0);
  CHECK(rt->precision().dtype == last_tune_decision(*rt)->chosen.precision);
  const TrainResult r = trainer.run();
  REQUIRE(r.losses.size() == 12);
  CHECK(std::isfinite(r.losses.back()));
  CHECK(r.losses.back() < r.losses.front());
}

TEST_CASE("starting accelkit, making its AdamW and tuning leave the program's random stream as it was") {
  TempDir cache;
  ScopedEnv env("ACCELKIT_CACHE_DIR", cache.str());
  accelkit::test::FakeProcStat quiet;  // trials timed on a busy machine would not be cached
  // What the program builds (and draws for) before: made first, so that only accelkit's own
  // work lies between the seed and the draw below.
  auto setup = start();
  Problem prob(*setup);
  torch::nn::Linear lin(8, 8);

  torch::manual_seed(1234);
  const at::Tensor expected = torch::randn({8});
  torch::manual_seed(1234);
  auto rt = start({{"autotune_cache", "false"}});           // profile auto: tuning on
  rt->make_adamw(lin->parameters(), {});                     // measures the AdamW implementations
  autotune(*rt, prob.p, quick());                             // times every candidate
  CHECK(torch::equal(torch::randn({8}), expected));
}

}  // namespace autotune_suite
