// Crash safety of `accelkit train`: killed with SIGKILL at random moments twenty times in a
// row and resumed each time, the newest checkpoint always loads, no partial checkpoint is ever
// visible, no step is lost or repeated: the run ends at exactly its step count, with the same
// weights as a run that was never interrupted.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <map>

#include <torch/serialize/input-archive.h>
#include <ATen/ATen.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "accelkit/checkpoint.hpp"
#include "accelkit/run_metrics.hpp"
#include "checkpoint_tensors.hpp"
#include "cli_process.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace train_crash_suite {

using namespace accelkit;
using namespace accelkit::test;

namespace {

constexpr int kSteps = 30000;  // ~15 s of training here: the kills land while it runs

std::string write_config(const fs::path& dir, const fs::path& ckpt) {
  const fs::path cfg = dir / "train.toml";
  // One thread and torch::optim: the same arithmetic in every process, whatever was measured.
  write_file(cfg, "device = \"cpu\"\nthreads = 1\nfused_optimizer = \"off\"\n\n[train]\nsteps = " +
                      std::to_string(kSteps) +
                      "\nbatch_size = 16\nwidth = 48\ndepth = 2\noutputs = 4\nlog_every = 500\n"
                      "checkpoint_every = 50\nkeep_last = 3\ncheckpoint_dir = \"" + ckpt.string() + "\"\n");
  return cfg.string();
}

// Every file a reader could take for a checkpoint must be a whole one.
void check_visible(const fs::path& ckpt, std::int64_t& newest) {
  // Killed before it made the directory (a slow start on a busy machine): nothing to see yet.
  if (!fs::exists(ckpt)) {
    CHECK(newest == 0);  // but never after a checkpoint was seen there
    return;
  }
  CheckpointDir dir(ckpt.string());
  for (const auto& e : fs::directory_iterator(ckpt)) {
    const std::string name = e.path().filename().string();
    if (name.front() == '.') continue;  // temp files and the lock: hidden, never read as a checkpoint
    // The run's metrics (a kill may tear its last line: the reader skips it) and its report.
    if (std::regex_match(name, std::regex(R"(metrics(\.\d+)?\.jsonl)"))) {
      CHECK_NOTHROW(read_metrics(e.path().string()));
      continue;
    }
    if (name == "report.html") continue;
    CHECK_MESSAGE(std::regex_match(name, std::regex(R"(step-\d{8}\.ckpt)")), name);
  }
  const auto files = dir.list();
  for (const auto& f : files) CHECK_NOTHROW(CheckpointDir::read(f.path));
  if (!files.empty()) {
    CHECK(files.front().step >= newest);  // progress is never lost
    newest = files.front().step;
  }
}

}  // namespace

TEST_CASE("SIGKILL at random points twenty times, resumed each time: exact at the end") {
  TempDir tmp("accelkit-train-crash");
  const fs::path ckpt = tmp.path() / "ckpt";
  const std::string cfg = write_config(tmp.path(), ckpt);
  const EnvOverrides env = {{"ACCELKIT_CACHE_DIR", (tmp.path() / "cache").string()}};
  std::mt19937 rng(20261125);  // the kill moments: random, but the same in every run of the test
  std::uniform_int_distribution<int> after_ms(300, 1500);
  std::int64_t newest = 0;
  int killed_running = 0;
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    CliProcess p({"train", "--config", cfg, "--resume"}, env);
    std::this_thread::sleep_for(std::chrono::milliseconds(after_ms(rng)));
    REQUIRE(::kill(p.pid(), SIGKILL) == 0);
    const RunResult r = p.wait();
    if (r.code == 128 + SIGKILL) ++killed_running;
    else CHECK_MESSAGE(r.code == 0, describe(r));  // it may have finished first
    check_visible(ckpt, newest);
  }
  CHECK(killed_running >= 15);  // the kills landed while it ran
  const RunResult done = run_cli({"train", "--config", cfg, "--resume", "--json"}, env);
  REQUIRE_MESSAGE(done.code == 0, describe(done));
  const auto end = nlohmann::json::parse(done.out.substr(done.out.rfind('\n', done.out.size() - 2) + 1));
  CHECK(end["event"] == "end");
  CHECK(end["step"] == kSteps);
  check_visible(ckpt, newest);
  CHECK(newest == kSteps);

  // The same run, never interrupted: the same final weights, bit for bit.
  const fs::path whole = tmp.path() / "whole";
  fs::create_directories(tmp.path() / "w");
  const std::string whole_cfg = write_config(tmp.path() / "w", whole);
  const RunResult uninterrupted = run_cli({"train", "--config", whole_cfg, "--json"}, env);
  REQUIRE_MESSAGE(uninterrupted.code == 0, describe(uninterrupted));
  const auto a = model_tensors(CheckpointDir::read(CheckpointDir(ckpt.string()).path_for(kSteps)));
  const auto b = model_tensors(CheckpointDir::read(CheckpointDir(whole.string()).path_for(kSteps)));
  REQUIRE(a.size() == b.size());
  REQUIRE_FALSE(a.empty());
  for (const auto& [key, t] : a) {
    CAPTURE(key);
    REQUIRE(b.count(key));
    CHECK(torch::equal(t, b.at(key)));
  }
}

}  // namespace train_crash_suite
