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
#include <optional>

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

constexpr int kSteps = 30000;  // ~15 s of training on a quiet 2-core machine

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

// Waits until the trainer has printed its start line (its device is up, it is about to resume
// and train), or until it exits or a minute has passed; the time it took, or nothing.
std::optional<std::chrono::milliseconds> wait_for_start(const CliProcess& p) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    if (p.out().find(R"("event":"start")") != std::string::npos)
      return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    if (::kill(p.pid(), 0) != 0) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

TEST_CASE("SIGKILL at random points twenty times, resumed each time: exact at the end") {
  TempDir tmp("accelkit-train-crash");
  const EnvOverrides env = {{"ACCELKIT_CACHE_DIR", (tmp.path() / "cache").string()}};

  // The same run, never interrupted, first: its length sets the kill moments, so that twenty
  // kills land while the run is still going on a fast machine as on a slow one.
  const fs::path whole = tmp.path() / "whole";
  fs::create_directories(tmp.path() / "w");
  const std::string whole_cfg = write_config(tmp.path() / "w", whole);
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult uninterrupted = run_cli({"train", "--config", whole_cfg, "--json"}, env);
  const auto whole_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  REQUIRE_MESSAGE(uninterrupted.code == 0, describe(uninterrupted));
  MESSAGE("uninterrupted run: " << whole_ms.count() << " ms");

  const fs::path ckpt = tmp.path() / "ckpt";
  const std::string cfg = write_config(tmp.path(), ckpt);
  std::mt19937 rng(20261125);  // the kill moments: random, but the same in every run of the test
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // Ten kills while training, each at most 1/30 of the whole run in: at most a third of it
  // trained by kills, so every one lands before the end.
  const double training_window_ms = static_cast<double>(whole_ms.count()) / 30.0;
  std::chrono::milliseconds startup{300};  // measured by the rounds that wait for the start line
  std::int64_t newest = 0;
  int killed_running = 0;
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    CliProcess p({"train", "--config", cfg, "--resume", "--json"}, env);
    if (round % 2 == 0) {
      // Before training: while it starts, loads its plugin, resumes from the newest checkpoint.
      std::this_thread::sleep_for(std::chrono::milliseconds(
          static_cast<std::int64_t>(unit(rng) * static_cast<double>(startup.count()))));
    } else {
      // While training: after its start line, at a random moment of the window.
      const auto started = wait_for_start(p);
      REQUIRE_MESSAGE(started, "no start line: " << p.out());
      startup = *started;
      std::this_thread::sleep_for(std::chrono::milliseconds(
          static_cast<std::int64_t>(unit(rng) * training_window_ms)));
    }
    REQUIRE(::kill(p.pid(), SIGKILL) == 0);
    const RunResult r = p.wait();
    if (r.code == 128 + SIGKILL) ++killed_running;
    else CHECK_MESSAGE(r.code == 0, describe(r));  // it finished first: the window was too long
    check_visible(ckpt, newest);
  }
  CHECK(killed_running == 20);  // the kills landed while it ran
  CHECK(newest > 0);            // and some of them after it had trained and saved
  const RunResult done = run_cli({"train", "--config", cfg, "--resume", "--json"}, env);
  REQUIRE_MESSAGE(done.code == 0, describe(done));
  const auto end = nlohmann::json::parse(done.out.substr(done.out.rfind('\n', done.out.size() - 2) + 1));
  CHECK(end["event"] == "end");
  CHECK(end["step"] == kSteps);
  check_visible(ckpt, newest);
  CHECK(newest == kSteps);

  // The same final weights as the run that was never interrupted, bit for bit.
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
