// Observe, then switch (step_tuning.hpp): the state machine on a scripted clock, and the
// runtime's part on a real training loop through the CPU plugin (the decision, the cache, the
// settings that turn it off).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
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
// `after_step(i)` runs after step i; the training goes on while it returns true.
double train_while(Runtime& rt, const std::function<bool(int)>& after_step) {
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
  for (int i = 0;; ++i) {
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
    if (i % 10 == 9) {  // an evaluation now and then, under no_grad: not a training step
      torch::NoGradGuard no_grad;
      auto ac = rt.autocast();
      (void)net->forward(x);
    }
    if (!after_step(i)) break;
  }
  return last;
}

double train(Runtime& rt, int steps, const std::function<void(int)>& after_step = {}) {
  return train_while(rt, [&](int i) {
    if (after_step) after_step(i);
    return i + 1 < steps;
  });
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Trains while other processes keep every core busy from the second step on (a scripted
// /proc/stat: the observation's decision is taken under contention) and are quiet from the
// decision on, until `done` or `seconds` have passed. `each_step` checks every step.
void contention_then_quiet(Runtime& rt, accelkit::test::FakeProcStat& load, double seconds,
                           const std::function<bool()>& done, const std::function<void()>& each_step = {}) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto t0 = std::chrono::steady_clock::now();
  train_while(rt, [&](int i) {
    if (i == 0) load.add_busy_seconds(cores * 3600.0);
    if (each_step) each_step();
    return !done() && seconds_since(t0) < seconds;
  });
}

// The ResNet case: a plan of fp32 at 2 threads and its 1-thread candidate, on a machine whose
// load the test scripts. Each step costs what its configuration costs under that load (measured
// figures: 2 threads 380 ms quiet, 1,284 ms beside a process busy on one core; 1 thread 513 and
// 598 ms); the load source reads the same script.
const StepConfig kTwo{false, at::kFloat, 2};
const StepConfig kSingle{false, at::kFloat, 1};

struct Machine {
  double now = 0;
  bool busy = false;
  double noise = 0;                 // each step's cost times 1 +- up to this, drawn
  std::function<double()> load;     // the load reading; default: 1 core busy or none
  std::map<std::string, double> quiet{{kTwo.label(), 380.0}, {kSingle.label(), 513.0}};
  std::map<std::string, double> loaded{{kTwo.label(), 1284.0}, {kSingle.label(), 598.0}};
  std::mt19937 rng{11};
  StepTuner tuner;
  explicit Machine(StepTuner::Options o = {})
      : tuner({kTwo, kSingle}, o, [this] { return now; }, [this] { return load ? load() : (busy ? 1.0 : 0.0); }) {}
  const StepConfig& step() {
    const StepConfig& c = tuner.enter(true);
    double cost = (busy ? loaded : quiet).at(c.label());
    if (noise > 0) cost *= 1.0 + noise * std::uniform_real_distribution<double>(-1.0, 1.0)(rng);
    now += cost;
    return c;
  }
  // Steps until `done` (true) or `max` steps (false).
  bool run_until(const std::function<bool()>& done, int max) {
    for (int i = 0; i < max; ++i) {
      if (done()) return true;
      step();
    }
    return done();
  }
};

struct ThreadsRestore {
  int threads = at::get_num_threads();
  ~ThreadsRestore() { at::set_num_threads(threads); }
};

}  // namespace

TEST_CASE("step tuning: every candidate each round, grouped by thread count, the fastest kept") {
  StepTuner::Options o;
  o.race_factor = 0;  // every round for every candidate (the next case races)
  Script s({{kPlan.label(), 10.0}, {kFp32.label(), 6.0}, {kOne.label(), 12.0}}, o);
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

TEST_CASE("step tuning: a candidate with fewer threads that cannot win is timed no more once its fastest step is "
          "race_factor slower") {
  const StepTuner::Options o;
  REQUIRE(o.race_factor > 1);
  // 1 thread at twice the fastest candidate's step: left once it has race_after timed steps
  // (a turn's interval is taken at the next step, so that can be a round later), so the
  // observation ends sooner and the program runs fewer of its slow steps.
  const std::map<std::string, double> costs{{kPlan.label(), 10.0}, {kFp32.label(), 6.0}, {kOne.label(), 12.0}};
  struct Run {
    int steps = 0, one_thread = 0;
  };
  auto observe = [](Script& s) {
    Run r;
    while (!s.tuner.decided() && r.steps < 1000) {
      r.one_thread += s.step().threads == 1;
      ++r.steps;
    }
    return r;
  };
  Script s(costs);
  // While it observes, the candidate left is named with its figure.
  Run before;
  while (s.tuner.status().samples[0].size() < 4) {
    before.one_thread += s.step().threads == 1;
    ++before.steps;
  }
  CHECK(s.tuner.status().why.find("; timed no more: bf16 autocast, 1 thread 12.0 ms (median of ") !=
        std::string::npos);
  Run raced = observe(s);
  raced.steps += before.steps;
  raced.one_thread += before.one_thread;
  REQUIRE(s.tuner.decided());
  const auto& st = s.tuner.status();
  INFO(st.why);
  CHECK(st.chosen == 1);
  CHECK(static_cast<int>(st.samples[2].size()) >= o.race_after);
  CHECK(static_cast<int>(st.samples[2].size()) < o.rounds);
  CHECK(static_cast<int>(st.samples[0].size()) == o.rounds);  // the plan and the rest: every round
  CHECK(static_cast<int>(st.samples[1].size()) == o.rounds);
  CHECK(st.median_ms[2] == doctest::Approx(12.0));
  CHECK(st.why.find("timed no more once their fastest step was 1.5x the fastest candidate's median or slower: "
                    "bf16 autocast, 1 thread 12.0 ms (median of ") != std::string::npos);
  CHECK(st.why.find("not timed") == std::string::npos);
  // Against the full schedule (race_factor = 0): fewer steps, fewer of them at 1 thread.
  StepTuner::Options off;
  off.race_factor = 0;
  Script f(costs, off);
  const Run full = observe(f);
  REQUIRE(f.tuner.decided());
  CHECK(f.tuner.status().chosen == 1);
  CHECK(f.tuner.status().why.find("timed no more") == std::string::npos);
  CHECK(raced.steps < full.steps);
  // The 1-thread turns of r rounds: a turn each, and the thread change's settle steps in every
  // other round (the groups alternate their order: [2 threads, 1 thread], then [1, 2]).
  auto one_thread_steps = [&](int r) { return r * o.steps_per_turn + (r + 1) / 2 * o.settle_steps; };
  CHECK(raced.one_thread == one_thread_steps(o.warmup_rounds + o.race_after));
  CHECK(full.one_thread == one_thread_steps(o.warmup_rounds + o.rounds));

  // 1.3x the fastest: within the race factor, timed every round.
  Script t({{kPlan.label(), 10.0}, {kFp32.label(), 9.0}, {kOne.label(), 11.7}});
  for (int i = 0; i < 1000 && !t.tuner.decided(); ++i) t.step();
  REQUIRE(t.tuner.decided());
  for (const auto& samples : t.tuner.status().samples) CHECK(static_cast<int>(samples.size()) == o.rounds);
  // The plan itself is never left out, however slow: the decision is taken against it.
  Script u({{kPlan.label(), 30.0}, {kFp32.label(), 6.0}, {kOne.label(), 7.0}});
  for (int i = 0; i < 1000 && !u.tuner.decided(); ++i) u.step();
  REQUIRE(u.tuner.decided());
  CHECK(static_cast<int>(u.tuner.status().samples[0].size()) == o.rounds);
  CHECK(u.tuner.status().chosen == 1);
  // A candidate at the fastest one's thread count is timed every round, however slow its steps
  // (a burst of other load could have made them so).
  Script v({{kPlan.label(), 10.0}, {kFp32.label(), 30.0}, {kOne.label(), 12.0}});
  for (int i = 0; i < 1000 && !v.tuner.decided(); ++i) v.step();
  REQUIRE(v.tuner.decided());
  for (const auto& samples : v.tuner.status().samples) CHECK(static_cast<int>(samples.size()) == o.rounds);
  CHECK(v.tuner.status().why.find("timed no more") == std::string::npos);
  // Bad options: loud.
  StepTuner::Options bad;
  bad.race_factor = 0.9;
  CHECK_THROWS_AS(StepTuner({kPlan, kFp32}, bad), std::invalid_argument);
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

TEST_CASE("step tuning revisits a decision: 1 thread under a burst, 2 once the machine is quiet again") {
  Machine m;
  m.busy = true;  // another process keeps a core busy while the first steps are observed
  REQUIRE(m.run_until([&] { return m.tuner.decided(); }, 1000));
  const StepTuningStatus& st = m.tuner.status();
  REQUIRE(st.chosen == 1);  // 598 ms against 1,284: right while the burst lasts
  CHECK(m.tuner.take_new_decision());
  CHECK(st.redecisions == 0);
  CHECK(st.no_revisit.empty());
  CHECK(m.tuner.decision_load() == doctest::Approx(1.0));

  m.busy = false;  // the burst is over
  bool seen_reobserving = false;
  const bool revisited = m.run_until(
      [&] {
        if (st.reobserving) {
          if (!seen_reobserving) CHECK(st.why.find("re-observing on the program's training steps (fp32, 2 threads; "
                                                   "fp32, 1 thread): from the next step, about ") != std::string::npos);
          seen_reobserving = true;
          CHECK(st.state == StepTuningStatus::State::decided);
          CHECK(st.why.find("re-observing on the program's training steps") != std::string::npos);
          CHECK(st.why.find("other processes kept 0.00 cores busy (1.00 when it was decided)") != std::string::npos);
        }
        return st.redecisions > 0;
      },
      60);  // 3 windows of 5 steps, then 3 rounds of 2 candidates
  REQUIRE(revisited);
  CHECK(seen_reobserving);
  INFO(st.why);
  CHECK(st.chosen == 0);
  CHECK(st.redecisions == 1);
  CHECK(m.tuner.take_new_decision());  // recorded (and cached) again by the runtime
  CHECK(st.last_revisit == st.why);
  CHECK(st.why.find("had fp32, 1 thread; chose fp32, 2 threads: 380.0 ms a step against 513.0 ms") != std::string::npos);
  CHECK(st.source.find("re-observed on the program's training steps") != std::string::npos);
  CHECK(st.median_ms[0] == doctest::Approx(380.0));
  CHECK(m.tuner.decision_load() == doctest::Approx(0.0));
  // It stays there while the machine stays quiet.
  for (int i = 0; i < 2000; ++i) CHECK(m.step() == kTwo);
  CHECK(st.redecisions == 1);

  // A burst that comes back for good is revisited too, the other way.
  m.busy = true;
  REQUIRE(m.run_until([&] { return st.redecisions == 2; }, 400));
  CHECK(st.chosen == 1);
  for (int i = 0; i < 200; ++i) CHECK(m.step() == kSingle);
}

TEST_CASE("step tuning revisits a decision taken under half a core's load once that load stops") {
  // Another process busy over part of the observation: 0.48 cores on average, short of
  // load_change, yet enough to make 1 thread win. Once it stops (0.02 cores) the fall to under
  // half the decision's load counts: 2 threads again.
  Machine m;
  m.busy = true;
  m.load = [] { return 0.48; };
  REQUIRE(m.run_until([&] { return m.tuner.decided(); }, 1000));
  const StepTuningStatus& st = m.tuner.status();
  REQUIRE(st.chosen == 1);
  CHECK(m.tuner.decision_load() == doctest::Approx(0.48));
  m.busy = false;
  m.load = [] { return 0.02; };
  REQUIRE(m.run_until([&] { return st.redecisions > 0; }, 60));
  INFO(st.why);
  CHECK(st.chosen == 0);
  CHECK(st.why.find("other processes kept 0.02 cores busy (0.48 when it was decided)") != std::string::npos);
  // A decision under 0.3 cores with the load staying between 0.2 and 0.4: no fall to half by
  // 0.25 cores, so nothing in 20,000 steps.
  Machine n;
  std::mt19937 rng(5);
  n.load = [&rng] { return std::uniform_real_distribution<double>(0.2, 0.4)(rng); };
  for (int i = 0; i < 20000; ++i) n.step();
  REQUIRE(n.tuner.decided());
  CHECK(n.tuner.status().redecisions == 0);
}

TEST_CASE("step tuning revisits nothing under steady noise, bursts shorter than the sustain, or when told not to") {
  {  // Steps +-15% apart, other processes at 0-0.4 cores: no re-observation in 20,000 steps.
    Machine m;
    m.noise = 0.15;
    std::mt19937 rng(3);
    m.load = [&rng] { return std::uniform_real_distribution<double>(0.0, 0.4)(rng); };
    for (int i = 0; i < 20000; ++i) m.step();
    REQUIRE(m.tuner.decided());
    CHECK(m.tuner.status().chosen == 0);
    CHECK(m.tuner.status().redecisions == 0);
    CHECK_FALSE(m.tuner.status().reobserving);
  }
  {  // A core busy every other window: never sustained.
    Machine m;
    REQUIRE(m.run_until([&] { return m.tuner.decided(); }, 1000));
    int calls = 0;
    m.load = [&calls] { return ++calls % 2 == 0 ? 1.0 : 0.0; };
    for (int i = 0; i < 5000; ++i) m.step();
    CHECK(m.tuner.status().redecisions == 0);
  }
  {  // The program's steps become 60% slower, every candidate alike, other processes' load as
     // it was: nothing the load decided changed, so nothing is re-timed; the new time becomes
     // the reference, said once.
    Machine m;
    REQUIRE(m.run_until([&] { return m.tuner.decided(); }, 1000));
    for (int i = 0; i < 100; ++i) m.step();  // past the windows that take the reference
    for (auto& c : m.quiet) c.second *= 1.6;
    const std::uint64_t changes = m.tuner.changes();
    for (int i = 0; i < 5000; ++i) CHECK(m.step() == kTwo);
    const StepTuningStatus& st = m.tuner.status();
    CHECK(st.redecisions == 0);
    CHECK(m.tuner.changes() == changes + 1);
    INFO(st.last_watch);
    CHECK(st.last_watch.find("a step took 608.0 ms (380.0 ms in its first windows): other processes' load is as it "
                             "was, so no other candidate is favoured; fp32, 2 threads stands, and 608.0 ms is the "
                             "step's reference from here") != std::string::npos);
    CHECK(m.tuner.take_watch_note() == st.last_watch);
    CHECK(m.tuner.take_watch_note().empty());
  }
  {  // Where the load is not read (a device other than the CPU), the time alone re-times every
     // candidate: one re-observation keeps the choice and takes the new time as its reference.
    Machine m;
    m.load = [] { return -1.0; };
    REQUIRE(m.run_until([&] { return m.tuner.decided(); }, 1000));
    for (int i = 0; i < 100; ++i) m.step();
    for (auto& c : m.quiet) c.second *= 1.6;
    for (int i = 0; i < 5000; ++i) m.step();
    CHECK(m.tuner.status().redecisions == 1);
    CHECK(m.tuner.status().chosen == 0);
    CHECK(m.tuner.status().why.find("kept it: still the fastest") != std::string::npos);
    CHECK(m.tuner.status().why.find("a step took 608.0 ms (380.0 ms in its first windows)") != std::string::npos);
    CHECK(m.tuner.status().why.find("not re-timed") == std::string::npos);
  }
  {  // The load fell, but the standing choice already runs the most threads: nothing to re-time;
     // the new load is the reference, and a later rise is judged from it.
    Machine m;
    m.tuner.adopt(0, "step-tuning cache x", "cached", 1.0);  // 2 threads, though cached under load
    for (int i = 0; i < 200; ++i) CHECK(m.step() == kTwo);
    const StepTuningStatus& st = m.tuner.status();
    CHECK(st.redecisions == 0);
    CHECK_FALSE(st.reobserving);
    CHECK(m.tuner.decision_load() == doctest::Approx(0.0));
    CHECK(st.last_watch.find("fp32, 2 threads already runs the most threads of the candidates, so it stands; 0.00 "
                             "cores is the load's reference from here") != std::string::npos);
    m.busy = true;
    REQUIRE(m.run_until([&] { return st.redecisions == 1; }, 400));
    CHECK(st.chosen == 1);
  }
  {  // Revisiting off (the step_retune setting): the burst's choice stays.
    StepTuner::Options o;
    o.revisit = false;
    Machine m(o);
    m.busy = true;
    REQUIRE(m.run_until([&] { return m.tuner.decided(); }, 1000));
    m.busy = false;
    for (int i = 0; i < 2000; ++i) CHECK(m.step() == kSingle);
    CHECK(m.tuner.status().redecisions == 0);
    CHECK_FALSE(m.tuner.status().no_revisit.empty());
  }
  {  // Stopped in the middle of a re-observation: the standing choice, at once, for good.
    Machine m;
    m.busy = true;
    REQUIRE(m.run_until([&] { return m.tuner.decided(); }, 1000));
    m.busy = false;
    REQUIRE(m.run_until([&] { return m.tuner.status().reobserving; }, 100));
    m.tuner.stop_revisiting("the step is graph-captured");
    CHECK_FALSE(m.tuner.status().reobserving);
    CHECK(m.tuner.status().no_revisit == "the step is graph-captured");
    for (int i = 0; i < 500; ++i) CHECK(m.step() == kSingle);
    CHECK(m.tuner.status().redecisions == 0);
  }
}

TEST_CASE("step tuning re-times only the candidates a change of load can favour") {
  // Four candidates: the plan (bf16, 2 threads), fp32 at 2, and both at 1 thread. Under a
  // burst it keeps bf16 at 1 thread; once quiet it re-times that one and the 2-thread ones,
  // never fp32 at 1 thread (fewer threads cannot gain from a quieter machine).
  const StepConfig kFp32One{false, at::kFloat, 1};
  double now = 0;
  bool busy = true;
  std::map<std::string, double> quiet{{kPlan.label(), 300.0}, {kFp32.label(), 500.0}, {kOne.label(), 450.0},
                                      {kFp32One.label(), 700.0}};
  std::map<std::string, double> loaded{{kPlan.label(), 1000.0}, {kFp32.label(), 1500.0}, {kOne.label(), 480.0},
                                       {kFp32One.label(), 750.0}};
  StepTuner t({kPlan, kFp32, kOne, kFp32One}, {}, [&] { return now; }, [&] { return busy ? 1.0 : 0.0; });
  std::multiset<std::string> retimed;
  auto step = [&] {
    const StepConfig& c = t.enter(true);
    if (t.status().reobserving) retimed.insert(c.label());
    now += (busy ? loaded : quiet).at(c.label());
  };
  for (int i = 0; i < 1000 && !t.decided(); ++i) step();
  REQUIRE(t.decided());
  REQUIRE(t.status().chosen == 2);
  const double fp32_one = t.status().median_ms[3];
  busy = false;
  for (int i = 0; i < 200 && t.status().redecisions == 0; ++i) step();
  const StepTuningStatus& st = t.status();
  REQUIRE(st.redecisions == 1);
  INFO(st.why);
  CHECK(retimed.count(kFp32One.label()) == 0);
  CHECK(retimed.count(kPlan.label()) >= 3);
  CHECK(retimed.count(kFp32.label()) >= 3);
  CHECK(retimed.count(kOne.label()) >= 3);
  CHECK(st.chosen == 0);
  CHECK(st.samples[3].empty());
  CHECK(st.median_ms[3] == doctest::Approx(fp32_one));  // the first observation's, kept
  const std::string left = "; not re-timed, as the change cannot favour them: fp32, 1 thread";
  CHECK(st.why.size() > left.size());
  CHECK(st.why.substr(st.why.size() - left.size()) == left);
}

TEST_CASE("step tuning's watch windows hold the program's own steps, not the work between them") {
  // Steps of 4 ms, and the program does other work (10 s) after every 20th step. A window is
  // 500 ms of the steps' own time (125 of them), so the load's fall is acted on after the same
  // number of the program's steps with or without the work between them.
  auto steps_to_reobserve = [](double gap_ms) {
    const StepConfig kA{false, at::kFloat, 2};
    const StepConfig kB{false, at::kFloat, 1};
    double now = 0;
    bool busy = true;
    StepTuner t({kA, kB}, {}, [&] { return now; }, [&] { return busy ? 1.0 : 0.0; });
    int i = 0;
    auto step = [&] {
      const StepConfig& c = t.enter(true);
      now += c.threads == 2 ? (busy ? 9.0 : 4.0) : (busy ? 5.0 : 6.0);
      if (++i % 20 == 0) now += gap_ms;
    };
    while (!t.decided() && i < 1000) step();
    REQUIRE(t.decided());
    REQUIRE(t.status().chosen == 1);
    for (int k = 0; k < 300; ++k) step();  // windows under the burst, as decided
    busy = false;
    const int from = i;
    while (!t.status().reobserving && i < from + 5000) step();
    REQUIRE(t.status().reobserving);
    return i - from;
  };
  const int straight = steps_to_reobserve(0);
  const int interleaved = steps_to_reobserve(10000);
  INFO(straight << " and " << interleaved);
  // 3 windows of 500 ms of 6 ms steps (84 intervals each), give or take the window under way.
  CHECK(straight >= 2 * 84);
  CHECK(straight <= 4 * 84 + 3);
  CHECK(std::abs(straight - interleaved) <= 84 + 3);
}

TEST_CASE("step tuning revisits an adopted decision from the load it was cached under") {
  Machine m;
  m.tuner.adopt(0, "step-tuning cache x", "cached", 0.0);  // 2 threads, decided on a quiet machine
  m.busy = true;                                          // this run starts beside a busy process
  REQUIRE(m.run_until([&] { return m.tuner.status().redecisions == 1; }, 200));
  CHECK(m.tuner.status().chosen == 1);
  CHECK(m.tuner.take_new_decision());
}

TEST_CASE("step tuning says what it does while it observes") {
  StepTuner t({kPlan, kFp32, kOne}, {}, [] { return 0.0; });
  CHECK(t.status().why == "observing the program's first training steps (bf16 autocast, 2 threads; fp32, 2 threads; "
                          "bf16 autocast, 1 thread): step 0 of about 60");
  for (int i = 0; i < 12; ++i) t.enter(true);
  t.enter(false);  // an evaluation is no training step
  CHECK(t.status().why.find("): step 12 of about 60") != std::string::npos);
  t.note("master weights");
  CHECK(t.status().why.find("1 thread; master weights): step 12") != std::string::npos);
  // "About" is what a full observation takes: the first test counts its steps exactly (here no
  // candidate is slow enough to be left early).
  Script s({{kPlan.label(), 10.0}, {kFp32.label(), 6.0}, {kOne.label(), 8.0}});
  int steps = 0;
  while (!s.tuner.decided()) {
    s.step();
    ++steps;
  }
  CHECK(steps == 61);  // 60 observed, the 61st decided
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

  // A program that trains a second model too (a GAN's two) is another program: its key names
  // both models, so the first one's decision is not read for it.
  auto two = start();
  torch::nn::Linear other(16, 8);
  two->prepare(*other);
  train(*two, 2);
  const StepTuningStatus& both = two->step_tuning();
  INFO(both.source);
  CHECK(both.state == StepTuningStatus::State::observing);
  CHECK(both.steps_seen == 2);
}

TEST_CASE("step tuning: a choice observed while other processes took the cores is this run's, not cached") {
  ThreadsRestore restore;
  TempDir cache("accelkit-step-tuning");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  // (Not revisited: the quiet after the contention would be, the next test shows.)
  auto rt = start({{"step_retune", "false"}});
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

TEST_CASE("step tuning through the runtime: a decision taken under contention is revisited once it is quiet") {
  ThreadsRestore restore;
  TempDir cache("accelkit-step-tuning");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  accelkit::test::FakeProcStat load;
  auto rt = start();
  const StepTuningStatus& st = rt->step_tuning();
  if (st.state == StepTuningStatus::State::off) return;  // nothing to observe (said above)
  CHECK(st.no_revisit.empty());
  // What it decided under contention: a choice at fewer threads than the most is timed again
  // once it is quiet; one already at the most stands, the quiet load its new reference.
  int decided_threads = 0;
  int most = 0;
  contention_then_quiet(
      *rt, load, 60, [&] { return st.redecisions > 0 || !st.last_watch.empty(); },
      [&] {
        if (decided_threads == 0 && st.state == StepTuningStatus::State::decided) {
          decided_threads = st.candidates[st.chosen].threads;
          for (const StepConfig& c : st.candidates) most = std::max(most, c.threads);
        }
      });
  REQUIRE(decided_threads > 0);
  if (decided_threads == most) {
    INFO(st.last_watch);
    CHECK(st.redecisions == 0);
    CHECK(st.last_watch.find("already runs the most threads of the candidates, so it stands") != std::string::npos);
    CHECK(at::get_num_threads() == most);
    return;
  }
  REQUIRE(st.redecisions >= 1);
  INFO(st.last_revisit);
  INFO(st.source);
  CHECK(st.last_revisit.find("revisited (over the last 3 windows") != std::string::npos);
  CHECK(st.last_revisit.find("other processes kept 0.00 cores busy") != std::string::npos);
  CHECK(st.source.find("re-observed on the program's training steps") != std::string::npos);
  CHECK(st.source.find("cached in " + cache.path().string()) != std::string::npos);  // quiet now
  const auto& decisions = rt->context().decisions();
  auto it = std::find_if(decisions.begin(), decisions.end(), [](const RuntimeDecision& d) { return d.key == "step_tuning"; });
  REQUIRE(it != decisions.end());
  CHECK(it->value == st.candidates[st.chosen].label());
  CHECK(it->source == st.source);
  CHECK(at::get_num_threads() == st.candidates[st.chosen].threads);
}

TEST_CASE("step tuning through the runtime: step_retune = false keeps the decision; threads the user fixed stay") {
  ThreadsRestore restore;
  TempDir cache("accelkit-step-tuning");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  {
    accelkit::test::FakeProcStat load;
    auto rt = start({{"step_retune", "false"}});
    const StepTuningStatus& st = rt->step_tuning();
    if (st.state == StepTuningStatus::State::off) return;  // nothing to observe (said above)
    CHECK(st.no_revisit.find("step_retune = off (from") != std::string::npos);
    // Long enough for the revisit the test above sees (3 windows of half a second, then ~40 steps).
    contention_then_quiet(*rt, load, 6, [] { return false; });
    CHECK(st.state == StepTuningStatus::State::decided);
    CHECK(st.redecisions == 0);
    CHECK(st.source.find("not cached") != std::string::npos);
  }
  accelkit::test::FakeProcStat load;
  auto rt = start({{"threads", "1"}});
  const StepTuningStatus& st = rt->step_tuning();
  if (st.state == StepTuningStatus::State::off) return;  // the precision is fixed too, or nothing else
  for (const auto& c : st.candidates) CHECK(c.threads == 1);
  int other_threads = 0;
  contention_then_quiet(
      *rt, load, 60, [&] { return st.redecisions > 0 || !st.last_watch.empty(); },
      [&] { other_threads += at::get_num_threads() != 1; });
  // The load fell, and no candidate may run more threads: nothing to re-time, the quiet load is
  // the reference from here.
  INFO(st.last_watch);
  CHECK(st.redecisions == 0);
  CHECK(st.last_watch.find("already runs the most threads of the candidates, so it stands") != std::string::npos);
  CHECK(other_threads == 0);
  CHECK(at::get_num_threads() == 1);
}

TEST_CASE("step tuning through the runtime says what it does while it observes") {
  ThreadsRestore restore;
  TempDir cache("accelkit-step-tuning");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  auto rt = start();
  const StepTuningStatus& st = rt->step_tuning();
  if (st.state == StepTuningStatus::State::off) return;  // nothing to observe (said above)
  INFO(st.why);
  CHECK(st.why.find("observing the program's first training steps (") == 0);
  CHECK(st.why.find("): step 0 of about ") != std::string::npos);
  train(*rt, 12);  // and an evaluation after the 10th: no training step
  REQUIRE(st.state == StepTuningStatus::State::observing);
  CHECK(st.why.find("): step 12 of about ") != std::string::npos);
}

// A small convolutional network (2-D convolutions, BatchNorm, a transposed convolution) and the
// program's own optimizer (torch::optim::SGD with momentum, or Adam), trained `steps` steps on
// fixed inputs, through the runtime as the README's loop ports a program (prepare, forwards
// under rt->autocast(), rt->step).
struct ConvRun {
  torch::nn::Sequential net;
  double first_loss = 0, last_loss = 0;
};
// How the program turns the last convolution's 16x4x4x4 output into the loss's 16x16: a
// flatten() (works in any layout) or a view() (fails on channels-last activations).
enum class Head { flatten, view };
ConvRun train_conv(Runtime& rt, int steps, bool adam, Head head = Head::flatten) {
  torch::manual_seed(9);
  ConvRun r;
  r.net = torch::nn::Sequential(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1).bias(false)), torch::nn::BatchNorm2d(8),
      torch::nn::ReLU(), torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(8, 8, 4).stride(2).padding(1)),
      torch::nn::ReLU(), torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 4, 3).stride(2).padding(1)));
  std::unique_ptr<torch::optim::Optimizer> opt;
  if (adam) opt = std::make_unique<torch::optim::Adam>(r.net->parameters(), torch::optim::AdamOptions(1e-2));
  else opt = std::make_unique<torch::optim::SGD>(r.net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
  rt.prepare(*r.net, *opt);
  const at::Tensor x = torch::randn({16, 3, 12, 12});
  const at::Tensor y = torch::randn({16, 16});
  for (int i = 0; i < steps; ++i) {
    opt->zero_grad();
    at::Tensor out;
    {
      auto ac = rt.autocast();
      const at::Tensor h = torch::adaptive_avg_pool2d(r.net->forward(x), {2, 2});
      out = head == Head::flatten ? h.flatten(1) : h.view({h.size(0), -1});
    }
    at::Tensor loss = torch::mse_loss(out.to(at::kFloat), y);
    loss.backward();
    rt.step(*opt);
    (i == 0 ? r.first_loss : r.last_loss) = loss.item<double>();
  }
  return r;
}

std::size_t channels_last_candidates(const StepTuningStatus& st) {
  return static_cast<std::size_t>(
      std::count_if(st.candidates.begin(), st.candidates.end(), [](const StepConfig& c) { return c.channels_last; }));
}

TEST_CASE("step tuning through the runtime: with channels_last on, a model with 2-D convolutions is timed with "
          "channels-last weights too; its weights end in the chosen layout, and the switches change no value") {
  ThreadsRestore restore;
  TempDir cache("accelkit-step-tuning");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  accelkit::test::FakeProcStat quiet;
  constexpr int kSteps = 160;
  for (const bool adam : {false, true}) {
    CAPTURE(adam);
    // fp32 fixed, so every candidate computes what the fixed configuration does (only the
    // summation order of another thread count or layout differs).
    auto rt = start({{"precision", "fp32"}, {"kernels", "off"}, {"channels_last", "on"}});
    if (rt->step_tuning().state == StepTuningStatus::State::off) {
      MESSAGE("skipped: " << rt->step_tuning().why);
      return;
    }
    const ConvRun tuned = train_conv(*rt, kSteps, adam);
    const StepTuningStatus& st = rt->step_tuning();
    INFO(st.why);
    std::vector<std::string> labels;
    for (const auto& c : st.candidates) labels.push_back(c.label());
    INFO(accelkit::test::join(labels, "; "));
    std::size_t channels_last = 0;
    for (const auto& c : st.candidates) {
      if (!c.channels_last) continue;
      ++channels_last;
      StepConfig as_made = c;
      as_made.channels_last = false;
      CHECK(std::find(st.candidates.begin(), st.candidates.end(), as_made) != st.candidates.end());
    }
    CHECK(channels_last >= 1);
    REQUIRE(st.state == StepTuningStatus::State::decided);
    const bool chosen_cl = st.candidates[st.chosen].channels_last;
    for (const auto& p : tuned.net->parameters())
      if (p.dim() == 4) CHECK(p.is_contiguous(at::MemoryFormat::ChannelsLast) == chosen_cl);
    CHECK(tuned.last_loss < tuned.first_loss);
    if (adam) continue;  // Adam's normalised steps amplify rounding: SGD's (gentle) show the values

    // The same program with step tuning off (one configuration throughout): the same weights, to
    // rounding, against how far training moved them.
    auto fixed = start({{"precision", "fp32"}, {"kernels", "off"}, {"step_tuning", "false"}});
    const ConvRun plain = train_conv(*fixed, kSteps, adam);
    torch::manual_seed(9);
    const ConvRun init = train_conv(*fixed, 0, adam);
    const auto a = tuned.net->parameters(), b = plain.net->parameters(), w0 = init.net->parameters();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      CAPTURE(i);
      const double diff = (a[i] - b[i]).abs().max().item<double>();
      const double moved = (b[i] - w0[i]).abs().max().item<double>();
      INFO("largest difference " << diff << ", largest move from the start " << moved);
      CHECK(diff <= 5e-3 * moved);  // measured: at most 6e-4 of it; a misplaced value would be O(1)
    }
  }
}

TEST_CASE("step tuning, channels_last = auto (the default): the candidate is offered once the program's first step "
          "was watched and view()s nothing channels-last activations would fail") {
  ThreadsRestore restore;
  TempDir cache("accelkit-step-tuning");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  accelkit::test::FakeProcStat quiet;
  {
    auto rt = start({{"precision", "fp32"}, {"kernels", "off"}, {"autotune_cache", "false"}});
    if (rt->step_tuning().state == StepTuningStatus::State::off) {
      MESSAGE("skipped: " << rt->step_tuning().why);
      return;
    }
    // Before the first step: not offered yet.
    const ConvRun before = train_conv(*rt, 0, false);
    CHECK(channels_last_candidates(rt->step_tuning()) == 0);
  }
  auto rt2 = start({{"precision", "fp32"}, {"kernels", "off"}});
  const ConvRun r = train_conv(*rt2, 160, false, Head::flatten);
  const StepTuningStatus& st = rt2->step_tuning();
  INFO(st.why);
  CHECK(channels_last_candidates(st) == 1);
  REQUIRE(st.state == StepTuningStatus::State::decided);
  const bool chosen_cl = st.candidates[st.chosen].channels_last;
  for (const auto& p : r.net->parameters())
    if (p.dim() == 4) CHECK(p.is_contiguous(at::MemoryFormat::ChannelsLast) == chosen_cl);
  CHECK(r.last_loss < r.first_loss);

  // The next run reads the decision from the cache, keyed with the candidate.
  auto rt3 = start({{"precision", "fp32"}, {"kernels", "off"}});
  const ConvRun again = train_conv(*rt3, 4, false, Head::flatten);
  CHECK(rt3->step_tuning().state == StepTuningStatus::State::decided);
  CHECK(rt3->step_tuning().source.find("step-tuning cache") != std::string::npos);
  CHECK(rt3->step_tuning().candidates[rt3->step_tuning().chosen].label() == st.candidates[st.chosen].label());
}

TEST_CASE("step tuning, channels_last = auto: a program that view()s a convolution's 4-D output is never run "
          "channels-last, and the status says which view; off offers nothing") {
  ThreadsRestore restore;
  TempDir cache("accelkit-step-tuning");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  accelkit::test::FakeProcStat quiet;
  {
    auto rt = start({{"precision", "fp32"}, {"kernels", "off"}});
    if (rt->step_tuning().state == StepTuningStatus::State::off) {
      MESSAGE("skipped: " << rt->step_tuning().why);
      return;
    }
    // The whole observation runs: a channels-last step would throw in the program's view().
    const ConvRun r = train_conv(*rt, 120, false, Head::view);
    const StepTuningStatus& st = rt->step_tuning();
    INFO(st.why);
    CHECK(channels_last_candidates(st) == 0);
    CHECK(st.state == StepTuningStatus::State::decided);
    // The decision's why says it too.
    CHECK(st.why.find("; channels-last weights not timed: the program calls view([16, -1])") != std::string::npos);
    for (const auto& p : r.net->parameters()) CHECK(p.is_contiguous());
    CHECK(r.last_loss < r.first_loss);
  }
  {
    // While it observes, the status names the view.
    auto rt = start({{"precision", "fp32"}, {"kernels", "off"}, {"autotune_cache", "false"}});
    const ConvRun r = train_conv(*rt, 3, false, Head::view);
    const StepTuningStatus& st = rt->step_tuning();
    REQUIRE(st.state == StepTuningStatus::State::observing);
    CHECK(st.why.find("channels-last weights not timed: the program calls view([16, -1]) of a [16, 4, 2, 2] "
                      "tensor") != std::string::npos);
  }
  {
    auto rt = start({{"precision", "fp32"}, {"kernels", "off"}, {"channels_last", "off"}, {"autotune_cache", "false"}});
    const ConvRun r = train_conv(*rt, 3, false, Head::flatten);
    CHECK(channels_last_candidates(rt->step_tuning()) == 0);
    CHECK(rt->step_tuning().why.find("channels-last") == std::string::npos);
    for (const auto& p : r.net->parameters()) CHECK(p.is_contiguous());
  }
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
