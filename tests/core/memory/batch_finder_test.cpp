// The batch-size finder (batch_finder.hpp): the GPU search on scripted trials whose "device"
// runs out of memory above N samples (growth, recovery after each out-of-memory trial, the
// binary search), the CPU fit, the accumulation steps for a target effective batch, and
// Runtime::find_batch_size on the CPU on a real model with a small memory budget: its answer
// fits the budget and the search leaves the model and the random state as they were.
#include <torch/torch.h>

#include "torch_doctest.hpp"

#include <cstdlib>
#include <memory>

#include <filesystem>
#include <fstream>

#include <accelkit/batch_finder.hpp>
#include <accelkit/runtime.hpp>
#include <accelkit/sdk/torch_compat.hpp>
#include <accelkit/sdk/torch_compat_memory.hpp>

#include "test_support.hpp"

using namespace accelkit;

namespace {

// A device that runs out of memory above `limit` samples; a step takes 1000 bytes a sample.
std::function<BatchTrial(std::int64_t)> oom_above(std::int64_t limit, std::vector<std::int64_t>& tried) {
  return [limit, &tried](std::int64_t b) {
    tried.push_back(b);
    BatchTrial t;
    t.batch = b;
    t.fits = b <= limit;
    t.peak_bytes = t.fits ? static_cast<std::uint64_t>(b) * 1000 : 0;
    t.note = t.fits ? "fits" : "out of memory";
    return t;
  };
}

}  // namespace

TEST_CASE("search: grows x2 to the first out-of-memory, then bisects to within 1/16 below the limit") {
  for (std::int64_t limit : {1, 7, 300, 1000, 4097}) {
    std::vector<std::int64_t> tried;
    BatchSearchOptions o;
    o.max = 65536;
    const BatchDecision d = batch_finder::search(oom_above(limit, tried), o);
    INFO("limit " << limit);
    CHECK(d.largest <= limit);
    CHECK(d.largest >= limit - std::max<std::int64_t>(1, limit / 16));
    CHECK(d.memory_at_largest == static_cast<std::uint64_t>(d.largest) * 1000);
    CHECK(d.trials.size() == tried.size());
    CHECK(tried.size() <= 25);
    // After an out-of-memory trial the search went on (the recovery) unless it was the last.
    std::size_t ooms = 0;
    for (auto b : tried) ooms += b > limit;
    CHECK(ooms >= 1);
  }
}

TEST_CASE("search: a preset start above the limit halves down first; max caps the growth") {
  std::vector<std::int64_t> tried;
  BatchSearchOptions o;
  o.start = 1024;  // a preset (e.g. ROCm's) is where the search starts, not the answer
  const BatchDecision d = batch_finder::search(oom_above(300, tried), o);
  CHECK(tried.front() == 1024);
  CHECK(d.largest <= 300);
  CHECK(d.largest >= 300 - 300 / 16);

  tried.clear();
  o = BatchSearchOptions{};
  o.max = 1000;
  const BatchDecision capped = batch_finder::search(oom_above(1'000'000, tried), o);
  CHECK(capped.largest == 1000);
  CHECK(tried.back() == 1000);
}

TEST_CASE("search: nothing fits at min - an error naming the batch, no answer") {
  std::vector<std::int64_t> tried;
  BatchSearchOptions o;
  o.min = 4;
  CHECK_THROWS_WITH_AS(batch_finder::search(oom_above(2, tried), o), "the model does not fit at batch 4 (out of memory)",
                       BatchDoesNotFitError);
  o.min = 0;
  CHECK_THROWS_AS(batch_finder::search(oom_above(2, tried), o), std::invalid_argument);
}

TEST_CASE("a device's preset batch is where the search starts, not its answer") {
  DeviceInfo info;
  CHECK(batch_finder::preset_start(info) == 0);
  info.properties = {{"arch", "gfx1100"}, {"preset batch_size", "48"}};
  CHECK(batch_finder::preset_start(info) == 48);
  for (const char* bad : {"", "-4", "0", "12x", "99999999999999999999"}) {
    info.properties = {{"preset batch_size", bad}};
    CHECK(batch_finder::preset_start(info) == 0);
  }
  // From the preset 48 on a device that fits 100: up to 96, past it to 192 (out of memory),
  // then bisected; the answer is the limit, not the preset.
  std::vector<std::int64_t> tried;
  BatchSearchOptions o;
  o.start = 48;
  const BatchDecision d = batch_finder::search(oom_above(100, tried), o);
  CHECK(tried.front() == 48);
  CHECK(d.largest >= 94);
  CHECK(d.largest <= 100);
}

TEST_CASE("fit: the largest batch inside the budget; accumulation reaches a target effective batch") {
  BatchSearchOptions o;
  CHECK(batch_finder::fit(100e6, 1e6, 612'000'000, o) == 512);
  CHECK(batch_finder::fit(-5e6, 1e6, 612'000'000, o) == 612);  // a negative intercept counts as 0
  CHECK(batch_finder::fit(0, 0, 1'000, o) == o.max);           // no growth measured
  // No growth measured, but the fixed part alone passes the budget: nothing fits.
  CHECK_THROWS_AS(batch_finder::fit(2'000, 0, 1'000, o), BatchDoesNotFitError);
  o.max = 100;
  CHECK(batch_finder::fit(0, 1e6, 612'000'000, o) == 100);
  o.min = 8;
  CHECK_THROWS_AS(batch_finder::fit(100e6, 1e6, 105'000'000, o), BatchDoesNotFitError);

  BatchDecision d;
  d.largest = 384;
  batch_finder::accumulate(d, 1000);
  CHECK(d.accumulation == 3);
  CHECK(d.batch == 334);
  CHECK(d.effective == 1002);
  batch_finder::accumulate(d, 200);
  CHECK(d.accumulation == 1);
  CHECK(d.batch == 200);
  batch_finder::accumulate(d, 0);
  CHECK(d.batch == 384);
  CHECK(d.effective == 384);
}

namespace {

// A host step of 1 MiB + 1 KiB a sample; its forward and backward take `seconds(batch)`.
struct TimedSteps {
  std::function<double(std::int64_t)> seconds;
  std::vector<std::int64_t> tried;
  std::function<BatchTrial(std::int64_t)> step() {
    return [this](std::int64_t b) {
      tried.push_back(b);
      BatchTrial t;
      t.batch = b;
      t.fits = true;
      t.peak_bytes = (1u << 20) + static_cast<std::uint64_t>(b) * 1024;
      t.seconds = seconds(b);
      return t;
    };
  }
  static std::uint64_t backward_peak(std::int64_t b) { return (1u << 20) + static_cast<std::uint64_t>(b) * 1024; }
};

}  // namespace

TEST_CASE("fit_on_host: the step's time bounds the batch where memory allows more, and the decision says so") {
  TimedSteps steps{[](std::int64_t b) { return 1e-3 + 1e-4 * static_cast<double>(b); }, {}};
  BatchSearchOptions o;
  std::vector<std::int64_t> shown;
  o.trial_starts = [&](std::int64_t b) { shown.push_back(b); };
  const BatchDecision d = batch_finder::fit_on_host(steps.step(), TimedSteps::backward_peak, o, 16ull << 30, 0.5);
  MESSAGE(d.why);
  // (0.5 s - 1 ms) / 0.1 ms a sample: 4990, within a sample of float rounding; memory allows 65536.
  CHECK(d.largest >= 4989);
  CHECK(d.largest <= 4990);
  CHECK(d.why.find("batch_step_limit (500 ms a step) bounds the batch at") != std::string::npos);
  CHECK(d.why.find("memory would allow 65536") != std::string::npos);
  CHECK(d.why.find("confirmed by a step at it") != std::string::npos);
  // No trial ran past the limit, and each was announced before it ran.
  for (std::int64_t b : steps.tried) CHECK(steps.seconds(b) <= 0.5 * 1.25);
  CHECK(shown == steps.tried);
  // Without a limit, memory decides: the finder's max here.
  TimedSteps untimed{steps.seconds, {}};
  const BatchDecision m = batch_finder::fit_on_host(untimed.step(), TimedSteps::backward_peak, o, 16ull << 30, 0);
  CHECK(m.largest == o.max);
  CHECK(m.why.find("batch_step_limit") == std::string::npos);
}

TEST_CASE("fit_on_host: a step that grows faster than its line is shrunk to the largest measured batch") {
  // Linear up to 2048 samples, three times steeper past it (a cache the batch no longer fits).
  TimedSteps steps{[](std::int64_t b) { return (b <= 2048 ? 1e-4 : 3e-4) * static_cast<double>(b); }, {}};
  const BatchDecision d = batch_finder::fit_on_host(steps.step(), TimedSteps::backward_peak, {}, 16ull << 30, 0.5);
  MESSAGE(d.why);
  CHECK(d.largest == 2048);
  CHECK(d.why.find("the fit overshot") != std::string::npos);
  CHECK(d.why.find("a step at 5000 took 1.50 s and 5.9 MiB (over the limit), so the batch shrank to 2048") != std::string::npos);
}

TEST_CASE("fit_on_host: a smallest batch already over the limit is the answer, saying so") {
  TimedSteps steps{[](std::int64_t) { return 3.0; }, {}};
  BatchSearchOptions o;
  o.min = 4;
  const BatchDecision d = batch_finder::fit_on_host(steps.step(), TimedSteps::backward_peak, o, 16ull << 30, 2.0);
  CHECK(d.largest == 4);
  CHECK(d.why.find("a step at the smallest batch, 4, already takes 3.00 s, more than batch_step_limit (2.00 s)") !=
        std::string::npos);
  CHECK(steps.tried == std::vector<std::int64_t>{4, 4});  // the warm-up and the measured one, nothing larger
}

TEST_CASE("Runtime::find_batch_size on the CPU: a small budget bounds the batch; no trace in the model or RNG") {
  ::setenv("ACCELKIT_PLUGIN_PATH", ACCELKIT_PLUGIN_OUTPUT_DIR, 1);
  test::TempDir cache("accelkit-batch-cache");
  test::ScopedEnv env("ACCELKIT_CACHE_DIR", cache.path().string());
  ContextOptions co;
  co.settings.cli = {{"device", "cpu"}, {"precision", "fp32"}};
  auto rt = Runtime::start(co);
  torch::manual_seed(3);
  torch::nn::Sequential model(torch::nn::Linear(256, 1024), torch::nn::ReLU(), torch::nn::Linear(1024, 1024),
                              torch::nn::ReLU(), torch::nn::Linear(1024, 16));
  rt->prepare(*model);
  std::vector<at::Tensor> before;
  for (const auto& p : model->parameters()) before.push_back(p.detach().clone());

  BatchProblem p;
  p.name = "mlp";
  p.model = model.ptr().get();
  p.forward = [&](const at::Tensor& x) { return model->forward(x); };
  p.loss = [](const at::Tensor& y, const at::Tensor& t) { return torch::mse_loss(y, t); };
  p.make_batch = [](std::int64_t b) { return std::make_pair(torch::randn({b, 256}), torch::randn({b, 16})); };
  BatchSearchOptions o;
  o.memory_budget = 96u << 20;
  o.max_step_seconds = 0;  // memory alone bounds it here (the step's time: the fit_on_host cases)
  o.target_effective_batch = 50'000;
  torch::manual_seed(5);
  const at::Tensor expect_next = torch::rand({4});  // what the random stream gives next
  torch::manual_seed(5);
  const BatchDecision d = accelkit::find_batch_size(*rt, p, o);
  MESSAGE(d.why);
  CHECK(d.method == "fit");
  CHECK(d.device == "cpu:0");
  CHECK(d.budget <= o.memory_budget);
  CHECK(d.largest >= 1);
  CHECK(d.largest < 65536);  // the budget, not max, bounded it
  CHECK(d.memory_at_largest <= d.budget);
  CHECK(d.trials.size() >= 2);
  CHECK(d.accumulation * d.batch == d.effective);
  CHECK(d.effective >= 50'000);
  CHECK(d.batch <= d.largest);
  // No trace: the parameters as they were, and the random stream where it was.
  const auto params = model->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) CHECK(torch::equal(params[i], before[i]));
  CHECK(torch::equal(torch::rand({4}), expect_next));

  // The fit predicts: a real step at the answer allocates what was fitted, within the budget.
  std::int64_t measured = 0;
  {
    compat::TensorMemoryMeter meter;
    auto [x, y] = p.make_batch(d.largest);
    OptimizerChoice opt = rt->make_adamw(model->parameters(), p.adamw);
    torch::mse_loss(model->forward(x), y).backward();
    opt.optimizer->step();
    measured = meter.peak();
  }
  MESSAGE("batch " << d.largest << ": fitted " << d.memory_at_largest << " bytes, measured " << measured);
  CHECK(static_cast<double>(measured) <= 1.02 * static_cast<double>(d.budget));
  CHECK(static_cast<double>(measured) >= 0.8 * static_cast<double>(d.memory_at_largest));
  CHECK(static_cast<double>(measured) <= 1.2 * static_cast<double>(d.memory_at_largest));
}

namespace {

struct CpuProblem {
  torch::nn::Sequential model{torch::nn::Linear(128, 512), torch::nn::ReLU(), torch::nn::Linear(512, 8)};
  BatchProblem p;
  explicit CpuProblem(Runtime& rt) {
    rt.prepare(*model);
    p.name = "cached mlp";
    p.model = model.ptr().get();
    p.forward = [this](const at::Tensor& x) { return model->forward(x); };
    p.loss = [](const at::Tensor& y, const at::Tensor& t) { return torch::mse_loss(y, t); };
    p.make_batch = [](std::int64_t b) { return std::make_pair(torch::randn({b, 128}), torch::randn({b, 8})); };
  }
};

std::unique_ptr<Runtime> cpu_runtime() {
  ::setenv("ACCELKIT_PLUGIN_PATH", ACCELKIT_PLUGIN_OUTPUT_DIR, 1);
  ContextOptions co;
  co.settings.cli = {{"device", "cpu"}, {"precision", "fp32"}};
  return Runtime::start(co);
}

}  // namespace

TEST_CASE("find_batch_size caches its decision: the second call reads it back, a damaged entry is measured again") {
  test::TempDir cache("accelkit-batch-cache");
  test::ScopedEnv env("ACCELKIT_CACHE_DIR", cache.path().string());
  auto rt = cpu_runtime();
  CpuProblem problem(*rt);
  BatchSearchOptions o;
  o.memory_budget = 64u << 20;
  o.max = 4096;
  const BatchDecision first = accelkit::find_batch_size(*rt, problem.p, o);
  CHECK(first.origin == "measured");
  REQUIRE_FALSE(first.cache_file.empty());
  CHECK(std::filesystem::exists(first.cache_file));
  CHECK(first.cache_file.rfind(cache.path().string() + "/batch/", 0) == 0);

  // The same device, versions, model and options: the cache answers, with its evidence.
  o.target_effective_batch = 3 * first.largest + 1;
  const BatchDecision second = accelkit::find_batch_size(*rt, problem.p, o);
  CHECK(second.origin == "cache");
  CHECK(second.cache_file == first.cache_file);
  CHECK(second.largest == first.largest);
  CHECK(second.memory_at_largest == first.memory_at_largest);
  CHECK(second.trials.size() == first.trials.size());
  CHECK(second.accumulation == 4);  // the target is applied to the cached largest batch
  CHECK(second.effective >= o.target_effective_batch);
  bool recorded = false;
  for (const auto& d : rt->context().decisions())
    if (d.key == "batch_size") recorded = d.source.find("batch finder cache") != std::string::npos;
  CHECK(recorded);
  // list_batch_cache (what report shows) finds it.
  const auto listed = list_batch_cache(cache.path().string());
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].largest == first.largest);

  // Another model is another key.
  torch::nn::Sequential other(torch::nn::Linear(128, 256), torch::nn::ReLU(), torch::nn::Linear(256, 8));
  rt->prepare(*other);
  BatchProblem q = problem.p;
  q.model = other.ptr().get();
  q.forward = [&](const at::Tensor& x) { return other->forward(x); };
  CHECK(accelkit::find_batch_size(*rt, q, o).origin == "measured");
  CHECK(list_batch_cache(cache.path().string()).size() == 2);

  // A damaged entry: not used, measured again and rewritten.
  { std::ofstream(first.cache_file, std::ios::trunc) << "{\"format\": 1, \"key\": "; }
  const auto corrupt = list_batch_cache(cache.path().string());
  bool listed_corrupt = false;
  for (const auto& d : corrupt) listed_corrupt = listed_corrupt || d.origin == "corrupt";
  CHECK(listed_corrupt);
  const BatchDecision third = accelkit::find_batch_size(*rt, problem.p, o);
  CHECK(third.origin == "measured");
  CHECK(accelkit::find_batch_size(*rt, problem.p, o).origin == "cache");

  // autotune_cache = false: neither read nor written.
  ContextOptions co;
  co.settings.cli = {{"device", "cpu"}, {"precision", "fp32"}, {"autotune_cache", "false"}};
  auto uncached = Runtime::start(co);
  CpuProblem again(*uncached);
  const BatchDecision fresh = accelkit::find_batch_size(*uncached, again.p, o);
  CHECK(fresh.origin == "measured");
  CHECK(fresh.cache_file.empty());
}

TEST_CASE("find_batch_size on the CPU refuses, before any step, a model whose weights and AdamW state pass the budget") {
  test::TempDir cache("accelkit-batch-cache");
  test::ScopedEnv env("ACCELKIT_CACHE_DIR", cache.path().string());
  auto rt = cpu_runtime();
  CpuProblem problem(*rt);
  int steps = 0;
  auto forward = problem.p.forward;
  problem.p.forward = [&](const at::Tensor& x) {
    ++steps;
    return forward(x);
  };
  BatchSearchOptions o;
  o.memory_budget = 256u << 10;  // 256 KiB: the 70K parameters' weights, gradients and moments need ~1.1 MB
  CHECK_THROWS_WITH_AS(accelkit::find_batch_size(*rt, problem.p, o), doctest::Contains("no step was run"), BatchDoesNotFitError);
  CHECK(steps == 0);
  CHECK(list_batch_cache(cache.path().string()).empty());  // nothing cached for a failure
}

TEST_CASE("TensorMemoryMeter: counts a region's tensor bytes; LibTorch's warnings in it are handed on when it ends") {
  compat::WarningCollector outer;
  const at::Tensor before = torch::ones({1 << 16});  // allocated before the meter
  std::int64_t peak = 0;
  {
    compat::TensorMemoryMeter meter;
    at::Tensor a = torch::empty({1 << 18});  // 1 MiB
    TORCH_WARN("a warning raised inside the meter");
    CHECK(outer.messages().empty());  // held while the meter lives
    a.reset();
    peak = meter.peak();
  }
  CHECK(peak >= (1 << 20));
  REQUIRE(outer.messages().size() == 1);
  CHECK(outer.messages()[0].find("a warning raised inside the meter") != std::string::npos);
}
