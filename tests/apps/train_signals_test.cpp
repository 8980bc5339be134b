// `accelkit train` as one process under what a batch system or a supervisor does to it: a
// file-size limit (ulimit -f) stops it with the file named and "File too large", exit 1, no
// temporary file left and the previous checkpoint intact (not killed by SIGXFSZ); SIGHUP stops
// it as SIGTERM does, after the step, with that step saved (exit 129), unless SIGHUP was
// ignored when it began (nohup).
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <memory>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "accelkit/checkpoint.hpp"
#include "cli_process.hpp"
#include "test_support.hpp"

namespace train_signals_suite {

using namespace accelkit;
using namespace accelkit::test;

namespace {

std::string write_config(const fs::path& dir, const fs::path& ckpt, long steps) {
  const fs::path cfg = dir / "train.toml";
  write_file(cfg, "device = \"cpu\"\nthreads = 1\nprecision = \"fp32\"\nfused_optimizer = \"off\"\n\n[train]\nsteps = " +
                      std::to_string(steps) +
                      "\nbatch_size = 16\nwidth = 48\ndepth = 2\noutputs = 4\nlog_every = 5\n"
                      "checkpoint_every = 10\ncheckpoint_dir = \"" + ckpt.string() + "\"\n");
  return cfg.string();
}

// The files in `dir` whose name holds ".tmp-": temporary files a write left behind.
std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// Waits (a minute at most) until the newest checkpoint in `ckpt` is of step `step` or later: the
// run is training (older ones are pruned as it goes).
void wait_for_step(const fs::path& ckpt, std::int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  auto newest = [&] {
    const auto files = CheckpointDir(ckpt.string()).list();
    return files.empty() ? std::int64_t{-1} : files.front().step;
  };
  while (newest() < step && std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE_MESSAGE(newest() >= step, "no checkpoint of step " << step << " or later in " << ckpt << " within a minute");
}

// The run's last stop step from its "interrupted at step N of" line, or -1.
long interrupted_step(const std::string& err) {
  const std::string mark = "interrupted at step ";
  const auto at = err.find(mark);
  return at == std::string::npos ? -1 : std::stol(err.substr(at + mark.size()));
}

// This process's file-size limit lowered to `bytes` while it lives: a process started meanwhile
// keeps it (as under `ulimit -f`); this one writes nothing meanwhile.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved_) == 0);
    struct rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lowered) == 0);
  }
  ~FileSizeLimit() { ::setrlimit(RLIMIT_FSIZE, &saved_); }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  struct rlimit saved_ {};
};

// Signal `sig`'s disposition in this process set to `handler` (SIG_IGN: SIGHUP as under nohup;
// SIG_DFL: as usual, whatever this process was started with) while it lives, and so in a
// process started meanwhile.
class Disposition {
 public:
  Disposition(int sig, void (*handler)(int)) : sig_(sig) {
    struct sigaction set {};
    set.sa_handler = handler;
    sigemptyset(&set.sa_mask);
    REQUIRE(::sigaction(sig, &set, &saved_) == 0);
  }
  ~Disposition() { ::sigaction(sig_, &saved_, nullptr); }
  Disposition(const Disposition&) = delete;
  Disposition& operator=(const Disposition&) = delete;

 private:
  int sig_;
  struct sigaction saved_ {};
};

}  // namespace

TEST_CASE("train under a file-size limit: exit 1 naming the file, File too large, no temp file, the previous checkpoint intact") {
  TempDir tmp("accelkit-train-signals");
  const fs::path ckpt = tmp.path() / "ck";
  auto first = run_cli({"train", "--config", write_config(tmp.path(), ckpt, 10)});
  REQUIRE_MESSAGE(first.code == 0, describe(first));
  const fs::path kept = ckpt / "step-00000010.ckpt";
  REQUIRE(fs::exists(kept));
  const auto size = fs::file_size(kept);
  const std::string before = CheckpointDir::read(kept.string());

  // Half a checkpoint may be written: the next one (step 20) cannot be.
  cpu_plugin_dir();  // copied now, not under the limit
  RunResult limited;
  {
    std::unique_ptr<CliProcess> p;
    {
      Disposition usual(SIGXFSZ, SIG_DFL);  // what kills a process writing past the limit
      FileSizeLimit limit(size / 2);
      p = std::make_unique<CliProcess>(
          std::vector<std::string>{"train", "--config", write_config(tmp.path(), ckpt, 30), "--resume"}, EnvOverrides{});
    }
    limited = p->wait();
  }
  INFO(describe(limited));
  CHECK(limited.code == 1);  // not 128 + SIGXFSZ (153)
  const std::string line = "accelkit train: checkpoint: writing " + (ckpt / "step-00000020.ckpt").string() +
                           " failed: File too large (this process may write files of at most " +
                           std::to_string(size / 2) + " bytes: ulimit -f)\n";
  CHECK(contains(limited.err, line));
  CHECK(temp_files(ckpt).empty());
  CHECK_FALSE(fs::exists(ckpt / "step-00000020.ckpt"));
  CHECK(CheckpointDir::read(kept.string()) == before);

  // Without the limit the run goes on from the checkpoint kept.
  auto resumed = run_cli({"train", "--config", write_config(tmp.path(), ckpt, 30), "--resume"});
  INFO(describe(resumed));
  CHECK(resumed.code == 0);
  CHECK(contains(resumed.err, "resumed from " + kept.string() + " (step 10)"));
  CHECK(contains(resumed.err, "done: step 30/30"));
}

TEST_CASE("SIGHUP to a train: it stops after the step and saves it, exit 129, and resumes from it") {
  TempDir tmp("accelkit-train-signals");
  const fs::path ckpt = tmp.path() / "ck";
  std::unique_ptr<CliProcess> p;
  {
    Disposition usual(SIGHUP, SIG_DFL);
    p = std::make_unique<CliProcess>(
        std::vector<std::string>{"train", "--config", write_config(tmp.path(), ckpt, 100000000)}, EnvOverrides{});
  }
  wait_for_step(ckpt, 10);
  REQUIRE(::kill(p->pid(), SIGHUP) == 0);
  const RunResult r = p->wait();
  INFO(describe(r));
  CHECK(r.code == 128 + SIGHUP);
  CHECK(contains(r.err, "stopping after this step to save a checkpoint"));
  const long stopped = interrupted_step(r.err);
  REQUIRE(stopped > 10);
  CheckpointDir dir(ckpt.string());
  const auto files = dir.list();
  REQUIRE_FALSE(files.empty());
  CHECK(files.front().step == stopped);
  CHECK_NOTHROW(CheckpointDir::read(files.front().path));
  CHECK(temp_files(ckpt).empty());
  auto resumed = run_cli({"train", "--config", write_config(tmp.path(), ckpt, stopped + 5), "--resume"});
  INFO(describe(resumed));
  CHECK(resumed.code == 0);
  CHECK(contains(resumed.err, "(step " + std::to_string(stopped) + ")"));
}

TEST_CASE("SIGHUP ignored when a train begins (nohup): it trains on; SIGTERM still stops it") {
  TempDir tmp("accelkit-train-signals");
  const fs::path ckpt = tmp.path() / "ck";
  std::unique_ptr<CliProcess> p;
  {
    Disposition nohup(SIGHUP, SIG_IGN);
    p = std::make_unique<CliProcess>(
        std::vector<std::string>{"train", "--config", write_config(tmp.path(), ckpt, 100000000)}, EnvOverrides{});
  }
  wait_for_step(ckpt, 10);
  REQUIRE(::kill(p->pid(), SIGHUP) == 0);
  // Still training a while later: newer checkpoints come.
  const std::int64_t hung_up_at = CheckpointDir(ckpt.string()).list().front().step;
  wait_for_step(ckpt, hung_up_at + 100);
  REQUIRE(::kill(p->pid(), SIGTERM) == 0);
  const RunResult r = p->wait();
  INFO(describe(r));
  CHECK(r.code == 128 + SIGTERM);
  CHECK(interrupted_step(r.err) >= hung_up_at + 100);
}

}  // namespace train_signals_suite
