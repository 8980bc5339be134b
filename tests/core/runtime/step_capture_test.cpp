// Runtime::capture_step and StepCapture without a GPU: the compile setting's rules on the built
// CPU plugin (off, auto, an explicit graph that must fail loudly, a profile's graph that is
// skipped), eager steps bitwise equal to plain LibTorch, and the plugin path through a fake
// Device whose CapturedStep records, refuses or falls back - every step applied exactly once.
// The bench's accelkit variant reports its step mode.
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "accelkit/bench.hpp"
#include "accelkit/sdk/device.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/sdk/step_capture.hpp"
#include "accelkit/step_capture.hpp"

#include "torch_doctest.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace step_capture_suite {

using namespace accelkit;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

ContextOptions options(std::vector<std::pair<std::string, std::string>> cli,
                       std::map<std::string, std::string> env = {}) {
  ContextOptions o;
  o.settings.env = std::move(env);
  cli.insert(cli.begin(), {"device", "cpu"});
  o.settings.cli = std::move(cli);
  o.loader.cli_paths = {ACCELKIT_TEST_PLUGIN_DIR};
  o.loader.read_environment = false;
  o.loader.include_default_dirs = false;
  return o;
}

std::unique_ptr<Runtime> start(std::vector<std::pair<std::string, std::string>> cli = {},
                               std::map<std::string, std::string> env = {}) {
  return Runtime::start(options(std::move(cli), std::move(env)));
}

Settings settings(std::vector<std::pair<std::string, std::string>> cli) {
  SettingsInputs in;
  in.env = std::map<std::string, std::string>{};
  in.cli = std::move(cli);
  return Settings::resolve(in);
}

// A small model trained on static tensors; `steps` counts applied optimizer steps.
struct Trainee {
  torch::nn::Sequential net{nullptr};
  std::shared_ptr<torch::optim::AdamW> opt;
  torch::Tensor x, y, loss;
  int steps = 0;
  // Set by a fake capture attempt: the step then fails before changing anything, as a step
  // does when its recording is refused.
  const bool* capturing = nullptr;

  Trainee() {
    torch::manual_seed(11);
    net = torch::nn::Sequential(torch::nn::Linear(16, 32), torch::nn::ReLU(), torch::nn::Linear(32, 4));
    opt = std::make_shared<torch::optim::AdamW>(net->parameters(), torch::optim::AdamWOptions(1e-2));
    x = torch::randn({8, 16});
    y = torch::randn({8, 4});
    loss = torch::zeros({});
  }

  std::function<void()> step_fn() {
    return [this] {
      if (capturing && *capturing) throw std::runtime_error("operation not permitted when stream is capturing");
      zero_grad(*opt);
      torch::Tensor l = torch::mse_loss(net->forward(x), y);
      l.backward();
      opt->step();
      loss.copy_(l.detach());
      ++steps;
    };
  }

  // Fresh data for step i, written in place (the tensors stay where the step reads them).
  void feed(int i) {
    torch::manual_seed(100 + i);
    x.copy_(torch::randn({8, 16}));
    y.copy_(torch::randn({8, 4}));
  }
};

void check_bitwise_equal(Trainee& a, Trainee& b) {
  auto pa = a.net->parameters(), pb = b.net->parameters();
  REQUIRE(pa.size() == pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) CHECK(torch::equal(pa[i], pb[i]));
  CHECK(torch::equal(a.loss, b.loss));
}

// N plain eager steps on the same data as a run through a StepCapture.
Trainee reference(int n) {
  Trainee t;
  auto step = t.step_fn();
  for (int i = 0; i < n; ++i) {
    t.feed(i);
    step();
  }
  return t;
}

// What a plugin's CapturedStep does, without a GPU: `warmup` eager runs, then a "recording"
// that either succeeds (later runs stand in for replays by running the step) or is refused
// (the attempt fails, the step is re-run eagerly, and it runs eagerly from then on).
class FakeCapturedStep final : public CapturedStep {
 public:
  enum class Outcome { records, fails_while_recording, refuses_optimizer, step_error };

  FakeCapturedStep(std::function<void()> step, int warmup, Outcome outcome, bool* capturing)
      : step_(std::move(step)), warmup_(warmup), outcome_(outcome), capturing_(capturing) {
    if (outcome_ == Outcome::refuses_optimizer) reason_ = "the optimizer keeps its step count on the host";
  }

  Status run() noexcept override {
    return guarded("fake step", [&]() -> Status {
      ++runs_;
      if (outcome_ == Outcome::step_error && runs_ > warmup_)
        return Status(StatusCode::internal, "fake step: device reported an illegal address");
      if (captured_ || !reason_.empty() || runs_ <= warmup_) {
        step_();
        return Status::ok();
      }
      *capturing_ = true;
      try {
        step_();
      } catch (const std::exception& e) {
        *capturing_ = false;
        reason_ = std::string("graph capture failed, running eagerly: ") + e.what();
        step_();  // the recorded step never ran
        return Status::ok();
      }
      *capturing_ = false;
      captured_ = true;
      return Status::ok();
    });
  }
  bool captured() const noexcept override { return captured_; }
  std::string fallback_reason() const override { return reason_; }

  int runs() const noexcept { return runs_; }

 private:
  std::function<void()> step_;
  int warmup_;
  Outcome outcome_;
  bool* capturing_;
  int runs_ = 0;
  bool captured_ = false;
  std::string reason_;
};

class FakeDevice final : public Device {
 public:
  enum class Kind { captures, default_capture_step, refuses };

  FakeDevice(Kind kind, FakeCapturedStep::Outcome outcome = FakeCapturedStep::Outcome::records)
      : kind_(kind), outcome_(outcome) {
    info_.id = "fake:0";
    info_.torch_device = "cpu";
    info_.capabilities.add(Capability::fp32).add(Capability::graph_capture);
  }

  const DeviceInfo& info() const noexcept override { return info_; }
  Result<std::shared_ptr<Precision>> precision() noexcept override {
    return Status(StatusCode::not_supported, "fake");
  }
  Result<std::shared_ptr<Optimizer>> optimizer() noexcept override {
    return Status(StatusCode::not_supported, "fake");
  }
  Result<std::shared_ptr<Monitor>> monitor() noexcept override { return Status(StatusCode::not_supported, "fake"); }

  Result<std::shared_ptr<CapturedStep>> capture_step(torch::optim::Optimizer& optimizer, std::function<void()> step,
                                                     int warmup) noexcept override {
    ++capture_calls;
    if (kind_ == Kind::default_capture_step) return Device::capture_step(optimizer, std::move(step), warmup);
    if (kind_ == Kind::refuses) return Status(StatusCode::unavailable, "no free graph memory pool");
    last = std::make_shared<FakeCapturedStep>(std::move(step), warmup, outcome_, &capturing);
    return std::shared_ptr<CapturedStep>(last);
  }

  int capture_calls = 0;
  bool capturing = false;
  std::shared_ptr<FakeCapturedStep> last;

 private:
  Kind kind_;
  FakeCapturedStep::Outcome outcome_;
  DeviceInfo info_;
};

}  // namespace

TEST_CASE("compile = off: eager, and the reason names the setting's origin") {
  auto rt = start({{"compile", "off"}});
  Trainee t;
  auto runner = rt->capture_step(*t.opt, t.step_fn());
  REQUIRE(runner);
  CHECK_FALSE(runner->captured());
  CHECK(runner->eager());
  CHECK(runner->mode_reason() == "compile = off (from --compile)");
  CHECK(runner->mode() == "eager: compile = off (from --compile)");
  runner->run();
  CHECK(t.steps == 1);
}

TEST_CASE("compile = auto on the CPU: eager, because the device has no graph_capture") {
  auto rt = start();
  REQUIRE_FALSE(rt->device_handle()->info().capabilities.has(Capability::graph_capture));
  Trainee t;
  auto runner = rt->capture_step(*t.opt, t.step_fn());
  CHECK_FALSE(runner->captured());
  CHECK(runner->eager());
  MESSAGE(runner->mode());
  CHECK(contains(runner->mode_reason(), "compile = auto (from "));
  CHECK(contains(runner->mode_reason(), "cpu:0 has no graph_capture"));
  // An eager step can still be step-tuned: capture_step turns it off only where it captures.
  CHECK_FALSE(contains(rt->step_tuning().why, "graph-captured"));
}

TEST_CASE("an explicit compile = graph the device cannot honour fails loudly") {
  Trainee t;
  SUBCASE("command line") {
    auto rt = start({{"compile", "graph"}});
    try {
      rt->capture_step(*t.opt, t.step_fn());
      FAIL("no DeviceUnavailableError");
    } catch (const DeviceUnavailableError& e) {
      MESSAGE(std::string(e.what()));
      CHECK(contains(e.what(), "compile = graph (from --compile)"));
      CHECK(contains(e.what(), "cpu:0"));
    }
  }
  SUBCASE("environment") {
    auto rt = start({}, {{"ACCELKIT_COMPILE", "graph"}});
    try {
      rt->capture_step(*t.opt, t.step_fn());
      FAIL("no DeviceUnavailableError");
    } catch (const DeviceUnavailableError& e) {
      CHECK(contains(e.what(), "ACCELKIT_COMPILE"));
      CHECK(contains(e.what(), "cpu:0"));
    }
  }
  CHECK(t.steps == 0);
}

TEST_CASE("profile maximum_performance's compile = graph is skipped with a reason") {
  auto rt = start({{"profile", "maximum_performance"}});
  REQUIRE(rt->context().settings().text("compile") == "graph");
  REQUIRE(rt->context().settings().get("compile").origin == Origin::profile);
  Trainee t;
  auto runner = rt->capture_step(*t.opt, t.step_fn());
  CHECK(runner->eager());
  MESSAGE(runner->mode());
  CHECK(contains(runner->mode_reason(), "compile = graph (from profile maximum_performance)"));
  CHECK(contains(runner->mode_reason(), "no graph_capture"));
}

TEST_CASE("bad arguments are refused") {
  auto rt = start();
  Trainee t;
  CHECK_THROWS_AS(rt->capture_step(*t.opt, t.step_fn(), 0), std::invalid_argument);
  CHECK_THROWS_AS(rt->capture_step(*t.opt, std::function<void()>{}), std::invalid_argument);
}

TEST_CASE("steps through the StepCapture train exactly like plain eager steps (bitwise)") {
  constexpr int kSteps = 7;
  auto rt = start();
  Trainee t;
  auto runner = rt->capture_step(*t.opt, t.step_fn());
  for (int i = 0; i < kSteps; ++i) {
    t.feed(i);
    runner->run();
  }
  Trainee ref = reference(kSteps);
  CHECK(t.steps == kSteps);
  check_bitwise_equal(t, ref);
}

TEST_CASE("plugin path: a capture that fails after warm-up falls back, with the reason, losing no step") {
  constexpr int kSteps = 6;
  const Settings s = settings({});
  FakeDevice dev(FakeDevice::Kind::captures, FakeCapturedStep::Outcome::fails_while_recording);
  Trainee t;
  t.capturing = &dev.capturing;
  auto runner = make_step_capture(dev, s->compile, *t.opt, t.step_fn(), 1);
  REQUIRE(dev.last);
  CHECK_FALSE(runner->eager());
  CHECK(contains(runner->mode_reason(), "warming up"));
  t.feed(0);
  runner->run();  // warm-up
  CHECK_FALSE(runner->eager());
  CHECK_FALSE(runner->captured());
  for (int i = 1; i < kSteps; ++i) {
    t.feed(i);
    runner->run();
  }
  CHECK(dev.last->runs() == kSteps);
  CHECK(t.steps == kSteps);  // the failed recording's step re-ran once: none lost, none doubled
  CHECK(runner->eager());
  CHECK_FALSE(runner->captured());
  CHECK(runner->mode_reason() ==
        "graph capture failed, running eagerly: operation not permitted when stream is capturing");
  CHECK(contains(runner->mode(), "eager: graph capture failed"));
  Trainee ref = reference(kSteps);
  check_bitwise_equal(t, ref);
}

TEST_CASE("plugin path: a recorded step reports graph mode") {
  constexpr int kSteps = 5;
  const Settings s = settings({{"compile", "graph"}});  // explicit, and the device has it
  FakeDevice dev(FakeDevice::Kind::captures);
  Trainee t;
  auto runner = make_step_capture(dev, s->compile, *t.opt, t.step_fn(), 2);
  for (int i = 0; i < kSteps; ++i) {
    t.feed(i);
    runner->run();
    CHECK(runner->captured() == (i >= 2));
  }
  CHECK(t.steps == kSteps);
  CHECK(runner->mode() == "graph");
  CHECK(contains(runner->mode_reason(), "fake:0 (compile = graph (from --compile))"));
  CHECK_FALSE(runner->eager());
}

TEST_CASE("plugin path: refusals before the first step run eagerly with the device's reason") {
  const Settings s = settings({});
  Trainee t;
  SUBCASE("capture_step returns an error") {
    FakeDevice dev(FakeDevice::Kind::refuses);
    auto runner = make_step_capture(dev, s->compile, *t.opt, t.step_fn(), 3);
    CHECK(dev.capture_calls == 1);
    CHECK(runner->eager());
    CHECK(runner->mode_reason() ==
          "compile = auto (from built-in): fake:0 cannot capture the step: no free graph memory pool");
    runner->run();
    CHECK(t.steps == 1);
  }
  SUBCASE("the device lists graph_capture but keeps Device's default capture_step") {
    FakeDevice dev(FakeDevice::Kind::default_capture_step);
    auto runner = make_step_capture(dev, s->compile, *t.opt, t.step_fn(), 3);
    CHECK(runner->eager());
    CHECK(contains(runner->mode_reason(), "has no whole-step capture"));
  }
  SUBCASE("the CapturedStep refuses the optimizer at once") {
    FakeDevice dev(FakeDevice::Kind::captures, FakeCapturedStep::Outcome::refuses_optimizer);
    auto runner = make_step_capture(dev, s->compile, *t.opt, t.step_fn(), 3);
    CHECK(runner->eager());
    CHECK(contains(runner->mode_reason(), "keeps its step count on the host"));
    runner->run();
    CHECK(dev.last->runs() == 0);  // the plugin's object was dropped; the runner steps itself
    CHECK(t.steps == 1);
  }
  SUBCASE("explicit compile = graph: a refusal throws") {
    FakeDevice dev(FakeDevice::Kind::refuses);
    CHECK_THROWS_AS(make_step_capture(dev, settings({{"compile", "graph"}})->compile, *t.opt, t.step_fn(), 3),
                    DeviceUnavailableError);
  }
}

TEST_CASE("plugin path: a failing step surfaces as an exception with the plugin's message") {
  const Settings s = settings({});
  FakeDevice dev(FakeDevice::Kind::captures, FakeCapturedStep::Outcome::step_error);
  Trainee t;
  t.capturing = &dev.capturing;
  auto runner = make_step_capture(dev, s->compile, *t.opt, t.step_fn(), 1);
  runner->run();
  try {
    runner->run();
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(contains(e.what(), "illegal address"));
  }
  CHECK(t.steps == 1);
}

TEST_CASE("the bench's accelkit step goes through capture_step and says how it ran") {
  BenchOptions o;
  o.model = "mlp";
  o.width = 32;
  o.batch = 8;
  o.steps = 2;
  o.warmup = 1;
  o.floors = false;
  {
    auto rt = start();
    const BenchResult r = run_bench(*rt, o);
    MESSAGE(r.accelkit.step_mode);
    CHECK(contains(r.accelkit.step_mode, "eager: compile = auto (from "));
    CHECK(contains(r.accelkit.step_mode, "no graph_capture"));
    CHECK(r.accelkit.check.size() == static_cast<std::size_t>(o.check_steps) + 1);
    CHECK(r.accuracy.ok);
    const auto j = nlohmann::json::parse(bench_json(r));
    CHECK(j["accelkit"]["step_mode"] == r.accelkit.step_mode);
    CHECK(j["baseline"]["step_mode"] == "eager: plain LibTorch");
  }
  {
    auto rt = start({{"compile", "off"}});
    CHECK(run_bench(*rt, o).accelkit.step_mode == "eager: compile = off (from --compile)");
  }
  {
    auto rt = start({{"compile", "graph"}});
    CHECK_THROWS_AS(run_bench(*rt, o), DeviceUnavailableError);
  }
  {
    auto rt = start();
    o.model = "optimizer";
    o.batch = 0;
    CHECK(contains(run_bench(*rt, o).accelkit.step_mode, "no forward"));
  }
}

}  // namespace step_capture_suite
