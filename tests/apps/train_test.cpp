// Trainer: exact resume, corrupt-checkpoint fallback, keep_last, atomic writes, bf16 vs fp32,
// interruption, and the [train] config table. Small models on the built CPU plugin.
#include "accelkit/atomic_file.hpp"
#include "accelkit/checkpoint.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/run_metrics.hpp"
#include "accelkit/train.hpp"

#include <torch/nn/modules/linear.h>

#include "torch_doctest.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <string>

#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace train_suite {

using namespace accelkit;
using accelkit::test::contains;
using accelkit::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) {
  return (fs::path(ACCELKIT_TRAIN_FIXTURES) / name).lexically_normal().string();
}

// One runtime per precision (and extra settings) for the whole suite, on the build's CPU
// plugin only.
Runtime& runtime(const std::string& precision = "fp32",
                 const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  static std::map<std::string, std::unique_ptr<Runtime>> runtimes;
  std::string key = precision;
  for (const auto& [k, v] : extra) key += " " + k + "=" + v;
  auto& rt = runtimes[key];
  if (!rt) {
    ContextOptions o;
    o.settings.env = std::map<std::string, std::string>{};
    // One thread: deterministic and quick on a shared 2-core machine (no OpenMP spinning).
    o.settings.cli = {{"device", "cpu"}, {"precision", precision}, {"threads", "1"}};
    for (const auto& kv : extra) o.settings.cli.push_back(kv);
    o.loader.cli_paths = {ACCELKIT_TEST_PLUGIN_DIR};
    o.loader.read_environment = false;
    o.loader.include_default_dirs = false;
    rt = Runtime::start(o);
  }
  return *rt;
}

TrainConfig small(const fs::path& dir, std::int64_t steps) {
  TrainConfig c;
  c.steps = steps;
  c.batch_size = 32;
  c.width = 64;
  c.depth = 2;
  c.outputs = 8;
  c.lr = 3e-3;
  c.seed = 11;
  c.log_every = 7;  // not a divisor of the checkpoint interval: loss read-back must not matter
  c.checkpoint_dir = dir.string();
  c.checkpoint_every = 10;
  c.keep_last = 3;
  return c;
}

TrainResult train(const TrainConfig& c, bool resume = false, Runtime& rt = runtime()) {
  Trainer t(rt, c);
  TrainOptions o;
  o.resume = resume;
  return t.run(o);
}

bool same_params(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!at::equal(a[i], b[i])) return false;
  return true;
}

// The checkpoints in a run directory (beside them: metrics.jsonl and report.html).
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "metrics.jsonl" || name == "report.html") continue;
    out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ckpt(std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld.ckpt", static_cast<long long>(step));
  return name;
}

double mean_tail(const std::vector<double>& v, std::size_t n) {
  return std::accumulate(v.end() - static_cast<std::ptrdiff_t>(n), v.end(), 0.0) / static_cast<double>(n);
}

std::string refusal(const std::string& path) {
  try {
    read_train_config(path);
  } catch (const SettingsError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("resume is exact: N steps + resume to 2N == 2N uninterrupted (bitwise)") {
  TempDir tmp("accelkit-train");
  for (std::int64_t micro : {1, 2}) {
    CAPTURE(micro);
    auto whole_cfg = small(tmp.path() / ("whole" + std::to_string(micro)), 60);
    whole_cfg.micro_batches = micro;
    Trainer whole(runtime(), whole_cfg);
    TrainResult all = whole.run();
    REQUIRE(all.losses.size() == 60);
    CHECK(all.start_step == 0);
    CHECK(all.end_step == 60);

    auto cfg = small(tmp.path() / ("split" + std::to_string(micro)), 30);
    cfg.micro_batches = micro;
    TrainResult first = train(cfg);
    CHECK(first.end_step == 30);
    cfg.steps = 60;
    Trainer second(runtime(), cfg);
    TrainOptions o;
    o.resume = true;
    TrainResult rest = second.run(o);
    REQUIRE(rest.resumed_from);
    CHECK(fs::path(*rest.resumed_from).filename() == ckpt(30));
    CHECK(rest.start_step == 30);
    CHECK(rest.skipped.empty());

    std::vector<double> joined = first.losses;
    joined.insert(joined.end(), rest.losses.begin(), rest.losses.end());
    CHECK(joined == all.losses);  // bitwise
    CHECK(same_params(second.parameters(), whole.parameters()));
  }
}

TEST_CASE("the input pipeline: prefetching (depth 3) trains bit-equal to producing in the step, and is measured") {
  TempDir tmp("accelkit-train");
  auto cfg = small(tmp.path() / "inline", 25);
  const TrainResult inline_run = train(cfg, false, runtime("fp32", {{"prefetch", "0"}}));
  cfg.checkpoint_dir = (tmp.path() / "ahead").string();
  const TrainResult ahead = train(cfg, false, runtime("fp32", {{"prefetch", "3"}}));
  CHECK(inline_run.prefetch == 0);
  CHECK(ahead.prefetch == 3);
  REQUIRE(ahead.losses.size() == 25);
  CHECK(ahead.losses == inline_run.losses);  // bitwise
  CHECK(ahead.data_produce_ms > 0);
  CHECK(inline_run.data_wait_ms >= inline_run.data_produce_ms * 0.5);  // in the step, waiting is producing
  CHECK(ahead.train_ms > 0);
}

TEST_CASE("a stop request (Ctrl-C) finishes the step, saves, and the resumed run is exact") {
  TempDir tmp("accelkit-train");
  auto whole_cfg = small(tmp.path() / "whole", 40);
  Trainer whole(runtime(), whole_cfg);
  TrainResult all = whole.run();

  auto cfg = small(tmp.path() / "stopped", 40);
  std::atomic<bool> stop{false};
  TrainOptions o;
  o.stop = &stop;
  o.on_step = [&stop](const TrainProgress& p) {
    if (p.step == 23) stop = true;  // as the SIGINT handler would, mid-run
  };
  TrainResult part;
  {
    Trainer t(runtime(), cfg);
    part = t.run(o);
  }
  CHECK(part.interrupted);
  CHECK(part.end_step == 24);  // the flag is seen after the step that follows
  REQUIRE_FALSE(part.saved.empty());
  CHECK(fs::path(part.saved.back()).filename() == ckpt(24));

  Trainer resumed(runtime(), cfg);
  TrainOptions r;
  r.resume = true;
  TrainResult rest = resumed.run(r);
  CHECK(rest.start_step == 24);
  CHECK_FALSE(rest.interrupted);
  std::vector<double> joined = part.losses;
  joined.insert(joined.end(), rest.losses.begin(), rest.losses.end());
  CHECK(joined == all.losses);
  CHECK(same_params(resumed.parameters(), whole.parameters()));
}

TEST_CASE("a corrupt newest checkpoint falls back to the previous one") {
  TempDir tmp("accelkit-train");
  const fs::path dir = tmp.path() / "ckpt";
  auto cfg = small(dir, 30);
  train(cfg);
  REQUIRE(names_in(dir) == std::vector<std::string>{ckpt(10), ckpt(20), ckpt(30)});
  const fs::path newest = dir / ckpt(30);
  const auto size = fs::file_size(newest);

  SUBCASE("truncated") {
    fs::resize_file(newest, size / 2);
    cfg.steps = 35;
    TrainResult r = train(cfg, true);
    REQUIRE(r.resumed_from);
    CHECK(fs::path(*r.resumed_from).filename() == ckpt(20));
    CHECK(r.start_step == 20);
    CHECK(r.end_step == 35);
    REQUIRE(r.skipped.size() == 1);
    CHECK(r.skipped[0].path == newest.string());
    CHECK(contains(r.skipped[0].reason, "truncated"));
    CHECK(test::any_contains(r.warnings, "falling back to the previous one"));
  }
  SUBCASE("garbage") {
    test::write_file(newest, "this is not a checkpoint at all, just some text that got here");
    TrainResult r = train(cfg, true);
    REQUIRE(r.resumed_from);
    CHECK(fs::path(*r.resumed_from).filename() == ckpt(20));
    REQUIRE(r.skipped.size() == 1);
    CHECK(contains(r.skipped[0].reason, "not an accelkit checkpoint"));
  }
  SUBCASE("one flipped byte in the payload") {
    {
      std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(size / 2));
      char c = 0;
      f.read(&c, 1);
      f.seekp(static_cast<std::streamoff>(size / 2));
      c = static_cast<char>(c ^ 0x10);
      f.write(&c, 1);
    }
    TrainResult r = train(cfg, true);
    REQUIRE(r.skipped.size() == 1);
    CHECK(contains(r.skipped[0].reason, "checksum mismatch"));
    CHECK(r.start_step == 20);
  }
  SUBCASE("none valid: an error with every reason") {
    for (auto step : {10, 20, 30}) fs::resize_file(dir / ckpt(step), 10);
    try {
      train(cfg, true);
      FAIL("resumed from nothing");
    } catch (const TrainError& e) {
      const std::string what = e.what();
      CHECK(contains(what, "no valid checkpoint"));
      for (auto step : {10, 20, 30}) CHECK(contains(what, ckpt(step)));
    }
  }
  SUBCASE("the fallback continues exactly as the uninterrupted run") {
    fs::resize_file(newest, size - 1);
    cfg.steps = 40;
    TrainResult resumed = train(cfg, true);
    TrainResult all = train(small(tmp.path() / "whole", 40));
    std::vector<double> tail(all.losses.begin() + 20, all.losses.end());
    CHECK(resumed.losses == tail);
  }
}

TEST_CASE("keep_last keeps the newest K checkpoints") {
  TempDir tmp("accelkit-train");
  auto cfg = small(tmp.path() / "k2", 50);
  cfg.keep_last = 2;
  TrainResult r = train(cfg);
  CHECK(names_in(cfg.checkpoint_dir) == std::vector<std::string>{ckpt(40), ckpt(50)});
  CHECK(r.saved.size() == 5);
  CHECK(r.pruned.size() == 3);

  auto all = small(tmp.path() / "all", 50);
  all.keep_last = 0;
  train(all);
  CHECK(names_in(all.checkpoint_dir).size() == 5);

  auto end_only = small(tmp.path() / "end", 25);
  end_only.checkpoint_every = 0;
  train(end_only);
  CHECK(names_in(end_only.checkpoint_dir) == std::vector<std::string>{ckpt(25)});  // the last step always
}

TEST_CASE("checkpoint writes are atomic and leave no temp files") {
  TempDir tmp("accelkit-train");
  const fs::path dir = tmp.path() / "ckpt";
  auto cfg = small(dir, 30);
  train(cfg);
  for (const auto& name : names_in(dir)) CHECK_MESSAGE(name.rfind("step-", 0) == 0, name);

  // A temp file that a killed write left behind is removed (with a warning) on the next run.
  test::write_file(dir / ".step-00000040.ckpt.tmp-99999", "half");
  cfg.steps = 40;
  TrainResult r = train(cfg, true);
  CHECK(test::any_contains(r.warnings, "interrupted checkpoint write"));
  CHECK(names_in(dir) == std::vector<std::string>{ckpt(20), ckpt(30), ckpt(40)});

  // Overwriting replaces the whole file; a failed write leaves nothing behind.
  const fs::path file = tmp.path() / "atomic" / "x.bin";
  fs::create_directories(file.parent_path());
  write_file_atomically(file.string(), "first");
  write_file_atomically(file.string(), "second");
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "second");
  CHECK(names_in(file.parent_path()) == std::vector<std::string>{"x.bin"});
  CHECK_THROWS_AS(write_file_atomically((tmp.path() / "missing" / "x.bin").string(), "x"), std::runtime_error);

  // The envelope round-trips and the CRC is zlib's.
  CHECK(crc32("123456789") == 0xCBF43926u);
  CheckpointDir cd((tmp.path() / "env").string());
  const std::string path = cd.write(7, std::string("payload\0with nul", 16));
  CHECK(CheckpointDir::read(path) == std::string("payload\0with nul", 16));
}

TEST_CASE("bf16 autocast and fp32 reach the same final loss; the task is learnable") {
  TempDir tmp("accelkit-train");
  auto cfg = small(tmp.path() / "fp32", 300);
  cfg.checkpoint_dir.clear();
  TrainResult fp32 = train(cfg, false, runtime("fp32"));
  TrainResult bf16 = train(cfg, false, runtime("bf16"));
  CHECK(fp32.precision == "fp32");
  CHECK(bf16.precision == "bf16 autocast");
  const double initial = fp32.losses.front();
  const double f = mean_tail(fp32.losses, 20), b = mean_tail(bf16.losses, 20);
  MESSAGE("initial " << initial << ", final fp32 " << f << ", bf16 " << b);
  CHECK(bf16.losses.front() == doctest::Approx(initial).epsilon(0.02));  // same model, same data
  CHECK(f < 0.10 * initial);  // learnable: here ~4% of the initial loss after 300 steps
  CHECK(b < 0.10 * initial);
  // Stated tolerance: the bf16 final loss (mean of the last 20 steps) within 5% of fp32's
  // (they differ by ~0.1% here).
  CHECK(std::abs(b - f) <= 0.05 * f);
}

// bf16 weights with their fp32 master in the fused AdamW (master_weights = on).
Runtime& master_runtime() { return runtime("bf16", {{"master_weights", "on"}}); }

TEST_CASE("master weights: make_adamw turns the model bf16 and says so; what cannot have them is refused or skipped") {
  torch::nn::Linear model(16, 8);
  OptimizerChoice choice = master_runtime().make_adamw(model->parameters(), AdamWConfig{});
  CHECK(choice.master_weights);
  CHECK(contains(choice.implementation, "bf16 weights + fp32 master"));
  CHECK(contains(choice.why, "master_weights = on (from --master-weights)"));
  CHECK((model->weight.scalar_type() == at::kBFloat16));
  CHECK((model->bias.scalar_type() == at::kFloat));  // vectors stay fp32
  // What it says the program must do, and that it is so: evaluation outside autocast fails,
  // under rt->autocast() it runs and agrees with the fp32 master's forward.
  CHECK(contains(choice.why, "training and evaluation - under rt->autocast()"));
  bool recorded = false;
  for (const auto& d : master_runtime().context().decisions()) recorded |= d.key == "master_weights";
  CHECK(recorded);
  {
    torch::NoGradGuard no_grad;
    model->eval();
    const at::Tensor x = at::randn({4, 16});
    compat::AutocastGuard off(c10::DeviceType::CPU, false, at::kBFloat16);
    CHECK_THROWS(model->forward(x));
    const at::Tensor ref = at::linear(x, model->weight.to(at::kFloat), model->bias);
    at::Tensor y;
    {
      auto ac = master_runtime().autocast();
      y = model->forward(x);
    }
    CHECK(at::allclose(y.to(at::kFloat), ref, 2e-2, 2e-2));
  }

  torch::nn::Linear bare(16, 8);  // not a model's weights: left in fp32
  OptimizerChoice plain = master_runtime().make_adamw(bare->parameters(), AdamWConfig{}, /*model_weights=*/false);
  CHECK_FALSE(plain.master_weights);
  for (const auto& p : bare->parameters()) CHECK((p.scalar_type() == at::kFloat));

  torch::nn::Linear fp32_model(16, 8);
  AdamWConfig asked;
  asked.master_weights = true;
  CHECK_THROWS_WITH_AS(runtime("fp32").make_adamw(fp32_model->parameters(), asked),
                       doctest::Contains("the precision plan is fp32, not bf16 autocast"), std::runtime_error);
  CHECK_THROWS_WITH_AS(runtime("fp32", {{"master_weights", "on"}}).make_adamw(fp32_model->parameters(), {}),
                       doctest::Contains("master_weights = on (from --master-weights) but the precision plan is fp32"),
                       std::runtime_error);
  // A profile asks for everything: where it cannot be, skipped with the reason.
  OptimizerChoice skipped =
      runtime("fp32", {{"profile", "maximum_performance"}}).make_adamw(fp32_model->parameters(), {});
  CHECK_FALSE(skipped.master_weights);
  CHECK(contains(skipped.why, "skipped: the precision plan is fp32"));
  for (const auto& p : fp32_model->parameters()) CHECK((p.scalar_type() == at::kFloat));
}

TEST_CASE("master weights: resume is exact, the final loss matches fp32's, and a mode change is refused") {
  TempDir tmp("accelkit-train");
  auto whole_cfg = small(tmp.path() / "whole", 40);
  Trainer whole(master_runtime(), whole_cfg);
  TrainResult all = whole.run();
  for (const auto& p : whole.parameters()) CHECK((p.scalar_type() == (p.dim() >= 2 ? at::kBFloat16 : at::kFloat)));

  auto cfg = small(tmp.path() / "split", 20);
  train(cfg, false, master_runtime());
  cfg.steps = 40;
  Trainer second(master_runtime(), cfg);
  TrainOptions o;
  o.resume = true;
  TrainResult rest = second.run(o);
  REQUIRE(rest.resumed_from);
  CHECK(rest.start_step == 20);
  CHECK(same_params(second.parameters(), whole.parameters()));
  CHECK(rest.losses == std::vector<double>(all.losses.begin() + 20, all.losses.end()));  // bitwise

  auto other = cfg;
  other.steps = 50;
  try {
    train(other, true, runtime("bf16", {{"master_weights", "off"}}));
    FAIL("resumed a master-weights checkpoint into fp32 weights");
  } catch (const TrainError& e) {
    CHECK(contains(e.what(), "resume with master_weights = on"));
  }

  // bf16 autocast over fp32 weights multiplies the same bf16-rounded weights and widens the
  // same bf16 weight gradients that master weights keep in bf16; the fp32 update is the same
  // when the AdamW implementation is (master weights are the plugin's own kernel's, so the
  // autocast run is pinned to it: another implementation rounds differently, and 300 steps
  // compound that). So the loss curves agree to float round-off, and the final loss is fp32's
  // within the tolerance stated for bf16 autocast above.
  auto long_cfg = small(tmp.path() / "long", 300);
  long_cfg.checkpoint_dir.clear();
  auto optimizers = runtime().device_handle()->optimizer();
  REQUIRE(optimizers.ok());
  const std::string own = optimizers.value()->adamw_implementations().front().name;
  const auto fp32 = train(long_cfg, false, runtime("fp32")).losses;
  const auto autocast = train(long_cfg, false, runtime("bf16", {{"adamw_implementation", own}})).losses;
  const auto master = train(long_cfg, false, master_runtime()).losses;
  REQUIRE(master.size() == autocast.size());
  double worst = 0;
  for (std::size_t i = 0; i < master.size(); ++i) worst = std::max(worst, std::abs(master[i] - autocast[i]) / autocast[i]);
  const double f = mean_tail(fp32, 20), a = mean_tail(autocast, 20), m = mean_tail(master, 20);
  MESSAGE("final loss fp32 " << f << ", bf16 autocast " << a << ", bf16 + fp32 master " << m
                             << "; master vs autocast, worst step " << worst << " relative");
  CHECK(worst <= 1e-3);
  CHECK(std::abs(m - f) <= 0.05 * f);
}

TEST_CASE("master_weights = auto: on in accelkit's own loop, off in a program's; a run begun with fp32 weights keeps them") {
  Runtime& rt = runtime("bf16");  // the default: auto
  REQUIRE(rt.context().settings().text("master_weights") == "auto");
  // A program's own loop (the default ForwardOwner): its model stays fp32, usable outside autocast.
  torch::nn::Linear mine(16, 8);
  OptimizerChoice program = rt.make_adamw(mine->parameters(), AdamWConfig{});
  CHECK_FALSE(program.master_weights);
  CHECK((mine->weight.scalar_type() == at::kFloat));
  // A loop that runs every forward under autocast asks for them and gets them, with no warning
  // for the program to act on.
  torch::nn::Linear owned(16, 8);
  OptimizerChoice loop = rt.make_adamw(owned->parameters(), AdamWConfig{}, true, ForwardOwner::accelkit);
  CHECK(loop.master_weights);
  CHECK((owned->weight.scalar_type() == at::kBFloat16));
  CHECK(contains(loop.why, "master_weights = auto (from built-in)"));
  CHECK(contains(loop.why, "accelkit's loop runs every forward of it under autocast"));
  CHECK_FALSE(contains(loop.why, "outside it a forward fails"));
  // Where the plan cannot have them, auto is skipped with the reason, never an error.
  torch::nn::Linear fp32_model(16, 8);
  OptimizerChoice skipped = runtime("fp32").make_adamw(fp32_model->parameters(), {}, true, ForwardOwner::accelkit);
  CHECK_FALSE(skipped.master_weights);
  CHECK(contains(skipped.why, "master_weights = auto (from built-in; accelkit runs every forward) skipped: the "
                              "precision plan is fp32"));

  // The trainer is such a loop: its student trains on bf16 weights by default.
  TempDir tmp("accelkit-train");
  auto cfg = small(tmp.path() / "ckpt", 10);
  Trainer t(rt, cfg);
  t.run();
  for (const auto& p : t.parameters()) CHECK((p.scalar_type() == (p.dim() >= 2 ? at::kBFloat16 : at::kFloat)));
  // A run begun with fp32 weights (master_weights = off) resumes under auto with fp32 weights.
  auto begun = small(tmp.path() / "begun", 10);
  train(begun, false, runtime("bf16", {{"master_weights", "off"}}));
  begun.steps = 15;
  Trainer resumed(rt, begun);
  TrainOptions o;
  o.resume = true;
  TrainResult r = resumed.run(o);
  CHECK(r.start_step == 10);
  CHECK(r.end_step == 15);
  for (const auto& p : resumed.parameters()) CHECK((p.scalar_type() == at::kFloat));
  CHECK(std::any_of(r.warnings.begin(), r.warnings.end(), [](const std::string& w) {
    return contains(w, "holds fp32 weights: master_weights = auto continues the run with them");
  }));
}

TEST_CASE("resume refuses what would not continue the same run") {
  TempDir tmp("accelkit-train");
  auto cfg = small(tmp.path() / "ckpt", 20);
  train(cfg);

  SUBCASE("existing checkpoints without resume") {
    try {
      train(cfg);
      FAIL("overwrote an earlier run");
    } catch (const TrainError& e) {
      CHECK(contains(e.what(), "--resume"));
    }
  }
  SUBCASE("a different model") {
    auto other = cfg;
    other.width = 32;
    other.steps = 30;
    try {
      train(other, true);
      FAIL("resumed another model");
    } catch (const TrainError& e) {
      CHECK(contains(e.what(), "width = 64 there, 32 in the config"));
    }
  }
  SUBCASE("a changed lr is applied, with a warning") {
    auto faster = cfg;
    faster.lr = 1e-3;
    faster.steps = 25;
    TrainResult r = train(faster, true);
    CHECK(r.start_step == 20);
    CHECK(test::any_contains(r.warnings, "lr changed"));
  }
  SUBCASE("already finished") {
    TrainResult r = train(cfg, true);
    CHECK(r.start_step == 20);
    CHECK(r.losses.empty());
    CHECK(test::any_contains(r.warnings, "nothing to train"));
  }
  SUBCASE("one run per directory") {
    CheckpointDir a(cfg.checkpoint_dir), b(cfg.checkpoint_dir);
    a.lock();
    CHECK_THROWS_WITH_AS(b.lock(), doctest::Contains("in use by another training run"), CheckpointError);
  }
}

TEST_CASE("resume with no checkpoint starts fresh with a warning") {
  TempDir tmp("accelkit-train");
  TrainResult r = train(small(tmp.path() / "empty", 10), true);
  CHECK_FALSE(r.resumed_from);
  CHECK(r.start_step == 0);
  CHECK(r.end_step == 10);
  CHECK(test::any_contains(r.warnings, "holds no checkpoint"));
}

TEST_CASE("[train] config: values, defaults, relative checkpoint_dir") {
  TrainConfig c = read_train_config(fixture("good.toml"));
  CHECK(c.steps == 120);
  CHECK(c.batch_size == 32);
  CHECK(c.micro_batches == 2);
  CHECK(c.width == 64);
  CHECK(c.lr == doctest::Approx(3e-3));
  CHECK(c.weight_decay == 0.0);  // an integer is fine where a number is expected
  CHECK(c.seed == 7);
  CHECK(c.keep_last == 2);
  CHECK(c.checkpoint_dir == (fs::path(ACCELKIT_TRAIN_FIXTURES) / "ckpt").lexically_normal().string());

  TrainConfig d = read_train_config(fixture("no_train.toml"), 48);
  CHECK(d.steps == TrainConfig{}.steps);
  CHECK(d.batch_size == 48);  // the batch_size setting when [train] has none

  // Settings read the same file and leave [train] to the trainer.
  SettingsInputs in;
  in.config_path = fixture("good.toml");
  in.env = std::map<std::string, std::string>{};
  Settings s = Settings::resolve(in);
  CHECK(s.text("device") == "cpu");
  CHECK(train_config_from(s).steps == 120);
}

TEST_CASE("[train] config errors name file:line:column, the key, and what was expected") {
  const std::string unknown = refusal(fixture("unknown_key.toml"));
  CHECK(contains(unknown, "unknown [train] key 'stpes' in " + fixture("unknown_key.toml") + ":5:1; did you mean 'steps'?"));
  CHECK(contains(unknown, "unknown [train] key 'colour' in " + fixture("unknown_key.toml") + ":6:1 (valid keys: steps,"));

  const std::string type = refusal(fixture("wrong_type.toml"));
  CHECK(contains(type, "'train.lr' in " + fixture("wrong_type.toml") + ":3:1 must be a number, got string"));
  CHECK(contains(type, "'train.width' in " + fixture("wrong_type.toml") + ":4:1 must be an integer, got floating-point number"));
  CHECK(contains(type, "'train.checkpoint_dir' in " + fixture("wrong_type.toml") + ":5:1 must be a string, got integer"));

  const std::string bounds = refusal(fixture("bounds.toml"));
  CHECK(contains(bounds, "'train.steps' in " + fixture("bounds.toml") + ":2:1 must be at least 1, got 0"));
  CHECK(contains(bounds, "'train.lr' in " + fixture("bounds.toml") + ":3:1 must be greater than 0, got 0"));
  CHECK(contains(bounds, "'train.keep_last' in " + fixture("bounds.toml") + ":4:1 must be at least 0, got -1"));

  CHECK(contains(refusal(fixture("micro_batches.toml")), "must divide batch_size (30), got 4"));
  CHECK(contains(refusal(fixture("not_a_table.toml")), "'train' in " + fixture("not_a_table.toml") + ":2:"));

  // Settings refuse a non-table 'train' too, and still refuse unknown tables.
  SettingsInputs in;
  in.config_path = fixture("not_a_table.toml");
  in.env = std::map<std::string, std::string>{};
  CHECK_THROWS_WITH_AS(Settings::resolve(in), doctest::Contains("must be a table ([train])"), SettingsError);
  in.config_path = fixture("typo_table.toml");
  CHECK_THROWS_WITH_AS(Settings::resolve(in),
                       doctest::Contains(("unknown table [trian] in " + fixture("typo_table.toml") + ":3:").c_str()),
                       SettingsError);
  CHECK_THROWS_WITH_AS(Settings::resolve(in), doctest::Contains("did you mean [train]?"), SettingsError);
}


TEST_CASE("a checkpoint written by a newer LibTorch is refused naming both versions; an older one is read") {
  TempDir tmp("accelkit-train");
  const fs::path dir = tmp.path() / "ckpt";
  auto cfg = small(dir, 10);
  train(cfg);
  const fs::path file = dir / ckpt(10);
  REQUIRE(fs::exists(file));
  // The envelope's LibTorch field: 16 bytes after magic, format version, crc and size.
  auto set_torch = [&](const std::string& v) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    std::string field = v;
    field.resize(16, '\0');
    f.seekp(24);
    f.write(field.data(), 16);
  };
  const std::string ours = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
  {
    std::ifstream in(file, std::ios::binary);
    std::string head(40, '\0');
    in.read(head.data(), 40);
    CHECK(head.substr(24, ours.size()) == ours);  // this build's version is recorded
  }
  set_torch("99.1.0");
  try {
    CheckpointDir::read(file.string());
    FAIL("read a checkpoint from LibTorch 99.1");
  } catch (const CheckpointError& e) {
    CHECK(contains(e.what(), "99.1.0"));
    CHECK(contains(e.what(), ours));
  }
  set_torch("1.0.0");  // older: LibTorch reads its predecessors' archives
  CHECK_FALSE(CheckpointDir::read(file.string()).empty());
}

TEST_CASE("the run directory's metrics.jsonl holds every step once with its loss, across a resume; report.html plots it") {
  TempDir tmp("accelkit-train");
  const fs::path dir = tmp.path() / "ckpt";
  auto cfg = small(dir, 24);
  const TrainResult part = train(cfg);  // checkpoints at 10 and 20 (and 24, the end)
  REQUIRE(part.metrics_path == (dir / "metrics.jsonl").string());
  REQUIRE(part.report_path == (dir / "report.html").string());
  cfg.steps = 40;
  const TrainResult rest = train(cfg, /*resume=*/true);
  std::vector<double> losses = part.losses;
  losses.insert(losses.end(), rest.losses.begin(), rest.losses.end());
  const MetricsLog log = read_metrics(rest.metrics_path);
  CHECK(log.warnings.empty());
  REQUIRE(log.runs.size() == 2);
  CHECK(log.runs[1].start_step == 24);
  REQUIRE(log.steps.size() == 40);
  for (std::size_t i = 0; i < log.steps.size(); ++i) {
    CAPTURE(i);
    const StepMetrics& m = log.steps[i];
    CHECK(m.step == static_cast<std::int64_t>(i) + 1);
    REQUIRE(m.loss);
    CHECK(*m.loss == losses[i]);  // read back bit for bit
    CHECK(m.step_ms > 0);
    CHECK(m.samples_per_s > 0);
    CHECK(m.memory_bytes);  // the CPU plugin reports the process's memory
  }
  std::ifstream page(rest.report_path);
  const std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  CHECK(html.find("data-series=\"loss\"") != std::string::npos);

  // A fresh run in the same directory keeps the earlier metrics aside.
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".ckpt") fs::remove(e.path());
  const TrainResult again = train(small(dir, 5));
  CHECK(fs::exists(dir / "metrics.1.jsonl"));
  CHECK(read_metrics(again.metrics_path).steps.size() == 5);
}

}  // namespace train_suite
