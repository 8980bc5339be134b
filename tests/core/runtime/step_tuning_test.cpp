// Observe, then switch (step_tuning.hpp): the state machine on a scripted clock, and the
// runtime's part on a real training loop through the CPU plugin (the decision, the cache, the
// settings that turn it off).
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "accelkit/runtime.hpp"
#include "accelkit/step_tuning.hpp"
#include "cpu_runtime.hpp"
#include "test_support.hpp"

#include "torch_doctest.hpp"

namespace step_tuning_suite {

using namespace accelkit;
using accelkit::test::ScopedEnv;
using accelkit::test::TempDir;
namespace fs = std::filesystem;

namespace {

const StepConfig kPlan{true, at::kBFloat16, 2};
const StepConfig kFp32{false, at::kFloat, 2};
const StepConfig kOne{true, at::kBFloat16, 1};

// Runs training steps on a scripted clock: each step lasts what its configuration costs.
struct Script {
  double now = 0;
  std::map<std::string, double> cost;  // by label
  StepTuner tuner;
  explicit Script(std::map<std::string, double> c, StepTuner::Options o = {})
      : cost(std::move(c)), tuner({kPlan, kFp32, kOne}, o, [this] { return now; }) {}
  // Paid by the steps after the thread count changed: switch_cost, then half, a quarter...
  double switch_cost = 0;
  int last_threads = 2;
  double owed = 0;
  const StepConfig& step(bool training = true) {
    const StepConfig& c = tuner.enter(training);
    if (c.threads != last_threads) owed = switch_cost;
    last_threads = c.threads;
    now += cost.at(c.label()) + owed;
    owed = owed >= 1 ? owed / 2 : 0;
    return c;
  }
};

std::unique_ptr<Runtime> start(std::vector<std::pair<std::string, std::string>> cli = {}) {
  return accelkit::test::start_cpu_runtime(std::move(cli));
}

// A small MLP trained with SGD the way the README's loop does; returns the last loss.
// `after_step(i)` runs after step i.
double train(Runtime& rt, int steps, const std::function<void(int)>& after_step = {}) {
  torch::manual_seed(5);
  torch::nn::Sequential net(torch::nn::Linear(32, 64), torch::nn::ReLU(), torch::nn::Linear(64, 4));
  rt.prepare(*net);
  SGDConfig sgd;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  OptimizerChoice opt = rt.make_sgd(net->parameters(), sgd);
  const at::Tensor x = torch::randn({64, 32});
  const at::Tensor y = torch::randn({64, 4});
  double last = 0;
  for (int i = 0; i < steps; ++i) {
    zero_grad(*opt.optimizer);
    at::Tensor out;
    {
      auto ac = rt.autocast();
      out = net->forward(x);
    }
    at::Tensor loss = torch::mse_loss(out.to(at::kFloat), y);
    loss.backward();
    opt.optimizer->step();
    last = loss.item<double>();
    if (after_step) after_step(i);
    if (i % 10 == 9) {  // an evaluation now and then, under no_grad: not a training step
      torch::NoGradGuard no_grad;
      auto ac = rt.autocast();
      (void)net->forward(x);
    }
  }
  return last;
}

struct ThreadsRestore {
  int threads = at::get_num_threads();
  ~ThreadsRestore() { at::set_num_threads(threads); }
};

}  // namespace

TEST_CASE("step tuning: every candidate each round, grouped by thread count, the fastest kept") {
  Script s({{kPlan.label(), 10.0}, {kFp32.label(), 6.0}, {kOne.label(), 12.0}});
  const StepTuner::Options o;
  std::vector<std::string> seq;
  while (!s.tuner.decided() && seq.size() < 1000) seq.push_back(s.step().label());
  REQUIRE(s.tuner.decided());
  // 2 candidates at 2 threads, 1 at 1 thread: per round 3 turns of steps_per_turn steps, and
  // settle_steps more for the one turn that changes the thread count (none in round 0 before
  // the switch: it starts at the plan's count).
  const int rounds = o.warmup_rounds + o.rounds;
  const std::size_t expected = static_cast<std::size_t>(rounds * 3 * o.steps_per_turn + rounds * o.settle_steps) + 1;
  CHECK(seq.size() == expected);  // the last entry decided
  int switches = 0;
  auto threads_of = [](const std::string& l) { return l.find("1 thread") != std::string::npos ? 1 : 2; };
  for (std::size_t i = 1; i + 1 < seq.size(); ++i) switches += threads_of(seq[i]) != threads_of(seq[i - 1]);
  CHECK(switches == rounds);  // once a round: the groups alternate their order
  CHECK(seq.back() == kFp32.label());
  CHECK(s.tuner.take_new_decision());
  CHECK_FALSE(s.tuner.take_new_decision());
  const auto& st = s.tuner.status();
  CHECK(st.chosen == 1);
  REQUIRE(st.median_ms.size() == 3);
  CHECK(st.median_ms[0] == doctest::Approx(10.0));
  CHECK(st.median_ms[1] == doctest::Approx(6.0));
  CHECK(st.median_ms[2] == doctest::Approx(12.0));
  for (const auto& samples : st.samples) CHECK(static_cast<int>(samples.size()) == o.rounds);
  CHECK(st.why.find("fp32, 2 threads took 6.00 ms") != std::string::npos);
  // From then on, training or not, the choice.
  for (int i = 0; i < 5; ++i) CHECK(s.step(i % 2 == 0).label() == kFp32.label());
}

TEST_CASE("step tuning: the steps after a thread-count change are not timed") {
  // A thread-count change costs 8 ms, 4, 2, 1 on the next steps (a resized thread pool): were
  // they timed, the candidates after a switch would lose; the medians are the steady costs.
  Script s({{kPlan.label(), 10.0}, {kFp32.label(), 8.0}, {kOne.label(), 12.0}});
  s.switch_cost = 8;
  for (int i = 0; i < 100 && !s.tuner.decided(); ++i) s.step();
  REQUIRE(s.tuner.decided());
  CHECK(s.tuner.status().chosen == 1);
  CHECK(s.tuner.status().median_ms[0] == doctest::Approx(10.0));
  CHECK(s.tuner.status().median_ms[2] == doctest::Approx(12.0));
}

TEST_CASE("step tuning: the plan stays unless another candidate beats it by the margin") {
  Script s({{kPlan.label(), 10.0}, {kFp32.label(), 9.8}, {kOne.label(), 11.0}});
  for (int i = 0; i < 200 && !s.tuner.decided(); ++i) s.step();
  REQUIRE(s.tuner.decided());
  CHECK(s.tuner.status().chosen == 0);
  CHECK(s.tuner.status().why.find("within the 3% margin") != std::string::npos);
}

TEST_CASE("step tuning: evaluation between steps is no candidate's time; too few timed steps keep the plan") {
  // An evaluation scope after every training step: no interval survives to be timed.
  Script s({{kPlan.label(), 10.0}, {kFp32.label(), 1.0}, {kOne.label(), 12.0}});
  int entries = 0;
  while (!s.tuner.decided() && entries < 10000) {
    s.step(true);
    s.step(false);
    entries += 2;
  }
  REQUIRE(s.tuner.decided());
  for (const auto& samples : s.tuner.status().samples) CHECK(samples.empty());
  CHECK(s.tuner.status().chosen == 0);
  CHECK(s.tuner.status().why.find("too few were timed") != std::string::npos);

  // Evaluation now and then only costs the interval it breaks.
  Script t({{kPlan.label(), 10.0}, {kFp32.label(), 4.0}, {kOne.label(), 12.0}});
  for (int i = 0; i < 1000 && !t.tuner.decided(); ++i) {
    t.step(true);
    if (i % 4 == 3) t.step(false);
  }
  REQUIRE(t.tuner.decided());
  INFO(t.tuner.status().why);
  CHECK(t.tuner.status().chosen == 1);
  // The 1-thread turns (settle steps + 2) never last 4 steps unbroken: left out, and said so.
  CHECK(t.tuner.status().why.find("not timed (their turns were interrupted every time): bf16 autocast, 1 thread") !=
        std::string::npos);
}

TEST_CASE("step tuning in a data-parallel run: the ranks decide together on the mean of their medians") {
  // Two ranks on one scripted schedule: rank 0 finds fp32 faster, rank 1 finds the plan much
  // faster; the mean keeps the plan on both. An in-memory store stands for the run's.
  std::map<std::string, std::string> store;
  auto agreement = [&store](int rank) {
    StepAgreement a;
    a.world_size = 2;
    a.publish = [&store, rank](int generation, const std::string& payload) {
      store[std::to_string(generation) + "/" + std::to_string(rank)] = payload;
    };
    a.poll = [&store](int generation) -> std::optional<std::vector<std::string>> {
      std::vector<std::string> out;
      for (int r = 0; r < 2; ++r) {
        const auto it = store.find(std::to_string(generation) + "/" + std::to_string(r));
        if (it == store.end()) return std::nullopt;
        out.push_back(it->second);
      }
      return out;
    };
    return a;
  };
  Script r0({{kPlan.label(), 10.0}, {kFp32.label(), 9.0}, {kOne.label(), 12.0}});
  Script r1({{kPlan.label(), 10.0}, {kFp32.label(), 14.0}, {kOne.label(), 12.0}});
  r0.tuner.set_agreement(agreement(0), 1);
  r1.tuner.set_agreement(agreement(1), 1);
  // Rank 0 reaches the end of the observation first: it runs the plan, untimed, until rank 1
  // has published too.
  for (int steps = 0; steps < 1000; ++steps) {
    const std::string on0 = r0.step().label();
    if (!store.empty()) break;
    CHECK(r1.step().label() == on0);  // one schedule
  }
  REQUIRE(store.size() == 1);  // rank 0 published; rank 1 not yet (it steps second)
  CHECK_FALSE(r0.tuner.decided());
  CHECK(r0.tuner.status().why.find("waiting for the other ranks") != std::string::npos);
  const StepConfig waiting = r1.step();  // rank 1 publishes and decides on both
  REQUIRE(r1.tuner.decided());
  CHECK(waiting == kPlan);
  CHECK(r0.step() == kPlan);  // rank 0 decides at its next step
  REQUIRE(r0.tuner.decided());
  for (const Script* s : {&r0, &r1}) {
    const auto& st = s->tuner.status();
    CHECK(st.chosen == 0);
    CHECK(st.median_ms[1] == doctest::Approx(11.5));  // (9 + 14) / 2
    CHECK(st.why.find("mean over 2 ranks") != std::string::npos);
    CHECK(st.source.find("of each of 2 ranks") != std::string::npos);
  }
  CHECK(r0.tuner.status().why == r1.tuner.status().why);

  // Candidates that differ between the ranks (another thread count): every rank keeps the plan.
  store.clear();
  StepTuner a({kPlan, kFp32}, {}, [] { return 0.0; });
  StepTuner b({kPlan, kOne}, {}, [] { return 0.0; });
  a.set_agreement(agreement(0), 2);
  b.set_agreement(agreement(1), 2);
  for (int i = 0; i < 1000 && !(a.decided() && b.decided()); ++i) {
    a.enter(true);
    b.enter(true);
  }
  REQUIRE(a.decided());
  REQUIRE(b.decided());
  CHECK(a.status().chosen == 0);
  CHECK(b.status().chosen == 0);
  CHECK(a.status().why.find("kept the plan: the ranks observed different candidates") != std::string::npos);

  // The process group gone (an empty answer): each rank decides on its own observation.
  StepAgreement gone = agreement(0);
  gone.poll = [](int) { return std::optional<std::vector<std::string>>(std::vector<std::string>{}); };
  Script alone({{kPlan.label(), 10.0}, {kFp32.label(), 6.0}, {kOne.label(), 12.0}});
  alone.tuner.set_agreement(gone, 3);
  for (int i = 0; i < 1000 && !alone.tuner.decided(); ++i) alone.step();
  CHECK(alone.tuner.status().chosen == 1);
}

TEST_CASE("step tuning: bad options and an adopted decision") {
  CHECK_THROWS_AS(StepTuner({}, {}), std::invalid_argument);
  StepTuner::Options bad;
  bad.rounds = 0;
  CHECK_THROWS_AS(StepTuner({kPlan}, bad), std::invalid_argument);
  StepTuner t({kPlan, kFp32}, {});
  CHECK_THROWS_AS(t.adopt(2, "x", "y"), std::out_of_range);
  t.adopt(1, "cache", "why");
  CHECK(t.decided());
  CHECK_FALSE(t.take_new_decision());  // adopted, not measured: nothing new to write
  CHECK(t.enter(true).label() == kFp32.label());
}

TEST_CASE("step tuning through the runtime: a real loop decides, records, caches; the next run reads the cache") {
  ThreadsRestore restore;
  TempDir cache("accelkit-step-tuning");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  auto rt = start();
  accelkit::test::FakeProcStat quiet;  // a figure from a busy machine would not be cached
  const StepTuningStatus& before = rt->step_tuning();
  if (before.state == StepTuningStatus::State::off) {
    // A plan with nothing to choose between (fp32 on a one-core machine): said so, and a loop runs.
    INFO(before.why);
    CHECK(before.why.find("nothing to choose") != std::string::npos);
    CHECK(std::isfinite(train(*rt, 5)));
    return;
  }
  REQUIRE(before.state == StepTuningStatus::State::observing);
  REQUIRE(before.candidates.size() >= 2);
  CHECK(before.candidates.front().autocast == rt->precision().autocast);

  const double loss = train(*rt, 140);
  CHECK(std::isfinite(loss));
  const StepTuningStatus& st = rt->step_tuning();
  REQUIRE(st.state == StepTuningStatus::State::decided);
  INFO(st.why);
  CHECK(st.source.find("observed on the program's first") != std::string::npos);
  CHECK(st.source.find("cached in " + cache.path().string()) != std::string::npos);
  const auto& decisions = rt->context().decisions();
  auto it = std::find_if(decisions.begin(), decisions.end(), [](const RuntimeDecision& d) { return d.key == "step_tuning"; });
  REQUIRE(it != decisions.end());
  CHECK(it->value == st.candidates[st.chosen].label());
  const int threads_chosen = st.candidates[st.chosen].threads;
  CHECK(at::get_num_threads() == threads_chosen);
  // The whole step runs as chosen, not only the scope: the thread's autocast outside it too.
  CHECK(compat::autocast_enabled(at::kCPU) == st.candidates[st.chosen].autocast);
  std::size_t entries = 0;
  for (const auto& e : fs::recursive_directory_iterator(cache.path())) entries += e.is_regular_file() ? 1 : 0;
  CHECK(entries >= 1);

  // The same model in a new runtime: the cached choice from its first step, no observation.
  auto again = start();
  train(*again, 2);
  const StepTuningStatus& cached = again->step_tuning();
  REQUIRE(cached.state == StepTuningStatus::State::decided);
  CHECK(cached.source.find("step-tuning cache") != std::string::npos);
  CHECK(cached.chosen == st.chosen);
  CHECK(cached.steps_seen == 0);
}

TEST_CASE("step tuning: a choice observed while other processes took the cores is this run's, not cached") {
  ThreadsRestore restore;
  TempDir cache("accelkit-step-tuning");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  auto rt = start();
  if (rt->step_tuning().state == StepTuningStatus::State::off) return;  // nothing to observe (said above)
  accelkit::test::FakeProcStat load;
  // Other processes use every core from the second step on.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  train(*rt, 140, [&](int i) {
    if (i == 0) load.add_busy_seconds(cores * 3600.0);
  });
  const StepTuningStatus& st = rt->step_tuning();
  REQUIRE(st.state == StepTuningStatus::State::decided);
  INFO(st.source);
  CHECK(st.source.find("not cached: while it observed, other processes kept") != std::string::npos);
  CHECK(st.source.find("cached in") == std::string::npos);
  CHECK(at::get_num_threads() == st.candidates[st.chosen].threads);  // this run still keeps its choice
  bool any = false;
  if (fs::exists(cache.path()))
    for (const auto& e : fs::recursive_directory_iterator(cache.path())) any = any || e.path().string().find("/steps/") != std::string::npos;
  CHECK_FALSE(any);

  // The next run observes again.
  auto again = start();
  train(*again, 2);
  CHECK(again->step_tuning().state == StepTuningStatus::State::observing);
}

TEST_CASE("step tuning: off by the setting, by ultra_low_overhead, and where the user fixed what it varies") {
  ThreadsRestore restore;
  TempDir cache("accelkit-step-tuning");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  {
    auto rt = start({{"step_tuning", "false"}});
    CHECK((rt->step_tuning().state == StepTuningStatus::State::off));
    CHECK(rt->step_tuning().why.find("step_tuning = off") != std::string::npos);
    train(*rt, 3);
    CHECK((rt->step_tuning().state == StepTuningStatus::State::off));
  }
  {
    auto rt = start({{"profile", "ultra_low_overhead"}});
    CHECK((rt->step_tuning().state == StepTuningStatus::State::off));
  }
  {
    // (The plugin's operator kernels are measured against LibTorch's unless fixed too.)
    auto rt = start({{"precision", "fp32"}, {"threads", "1"}, {"kernels", "off"}});
    CHECK((rt->step_tuning().state == StepTuningStatus::State::off));
    CHECK(rt->step_tuning().why.find("the user fixed precision") != std::string::npos);
  }
}

TEST_CASE("step tuning leaves the program's random streams as they were") {
  ThreadsRestore restore;
  TempDir cache("accelkit-step-tuning");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  auto draw = [](std::vector<std::pair<std::string, std::string>> cli) {
    auto rt = start(std::move(cli));
    train(*rt, 30);
    return torch::randn({8});
  };
  const at::Tensor with = draw({});
  const at::Tensor without = draw({{"step_tuning", "false"}});
  CHECK(torch::equal(with, without));
}

}  // namespace step_tuning_suite
