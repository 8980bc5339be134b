// accelkit train --nproc-per-node 2: two local workers over Gloo train the same weights as one
// process on the whole batch, rank 0 alone reports and checkpoints, and the run resumes at
// world size 1 from rank 0's checkpoint.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "accelkit/checkpoint.hpp"
#include "checkpoint_tensors.hpp"
#include "cli_process.hpp"
#include "test_support.hpp"

namespace train_dist_suite {

using namespace accelkit;
using namespace accelkit::test;

namespace {

// fp32 (no autocast) and torch::optim's AdamW: what differs between the runs is the reduction.
std::string write_config(const fs::path& dir, const fs::path& ckpt, int steps, int batch = 32) {
  const fs::path cfg = dir / "train.toml";
  write_file(cfg, "device = \"cpu\"\nprecision = \"fp32\"\nfused_optimizer = \"off\"\n\n[train]\nsteps = " +
                      std::to_string(steps) + "\nbatch_size = " + std::to_string(batch) +
                      "\nwidth = 48\ndepth = 2\noutputs = 4\nlog_every = 5\ncheckpoint_every = 10\n"
                      "checkpoint_dir = \"" + ckpt.string() + "\"\n");
  return cfg.string();
}

std::map<std::string, at::Tensor> model_of(const fs::path& ckpt_dir) {
  CheckpointDir dir(ckpt_dir.string());
  const auto files = dir.list();
  REQUIRE(!files.empty());
  return model_tensors(CheckpointDir::read(files.front().path));
}

// The processes whose parent is `parent` (from /proc/<pid>/stat), in pid order.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const auto close = line.rfind(')');  // "pid (comm) state ppid ..."
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == parent) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The launcher's 2 workers (rank order: started in it), once rank 0 has written the step-10
// checkpoint into `ckpt` (training is under way on both ranks).
std::vector<pid_t> workers_training(pid_t launcher, const fs::path& ckpt) {
  const auto start = std::chrono::steady_clock::now();
  while (!fs::exists(ckpt / "step-00000010.ckpt") &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(fs::exists(ckpt / "step-00000010.ckpt"));
  const auto workers = children_of(launcher);
  REQUIRE(workers.size() == 2);
  return workers;
}

std::vector<pid_t> workers_training(const CliProcess& launcher, const fs::path& ckpt) {
  return workers_training(launcher.pid(), ckpt);
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("train --nproc-per-node 2 equals one process, reports once, and resumes at world size 1") {
  TempDir tmp("accelkit-train-dist");
  const fs::path one = tmp.path() / "one", two = tmp.path() / "two";
  auto a = run_cli({"train", "--config", write_config(tmp.path() / ".", one, 20)});
  REQUIRE_MESSAGE(a.code == 0, describe(a));
  fs::create_directories(tmp.path() / "2");
  auto b = run_cli({"train", "--config", write_config(tmp.path() / "2", two, 20), "--nproc-per-node", "2"});
  REQUIRE_MESSAGE(b.code == 0, describe(b));
  INFO(describe(b));
  CHECK(b.err.find("2 data-parallel workers") != std::string::npos);
  CHECK(b.err.find("over 2 ranks (torchrun, gloo)") != std::string::npos);
  CHECK(b.err.find("shared by 2 ranks") != std::string::npos);
  CHECK(count(b.err, "done: step 20/20") == 1);  // rank 1 is quiet
  CHECK(fs::exists(two / "step-00000010.ckpt"));
  CHECK(fs::exists(two / "step-00000020.ckpt"));
  CHECK(fs::exists(two / "metrics.jsonl"));

  const auto ref = model_of(one), got = model_of(two);
  REQUIRE(ref.size() == got.size());
  double diff = 0, scale = 0;
  for (const auto& [name, t] : ref) {
    REQUIRE(got.count(name));
    diff = std::max(diff, (got.at(name) - t).abs().max().item<double>());
    scale = std::max(scale, t.abs().max().item<double>());
  }
  MESSAGE("2 workers vs 1 process after 20 steps: max |difference| / max |weight| = " << diff / scale);
  CHECK(diff / scale < 1e-5);

  // Rank 0's checkpoint, resumed by one process.
  auto c = run_cli({"train", "--config", write_config(tmp.path() / "2", two, 30), "--resume"});
  REQUIRE_MESSAGE(c.code == 0, describe(c));
  CHECK(c.err.find("resumed from " + (two / "step-00000020.ckpt").string()) != std::string::npos);
  CHECK(c.err.find("done: step 30/30") != std::string::npos);
}

TEST_CASE("train --nproc-per-node 2, one worker killed (-9) mid-run: the run ends naming it, and resumes alone") {
  TempDir tmp("accelkit-train-dist");
  const fs::path ckpt = tmp.path() / "ck";
  const std::string long_run = write_config(tmp.path(), ckpt, 1000000, 32);
  CliProcess launcher({"train", "--config", long_run, "--nproc-per-node", "2", "--dist-timeout", "20"}, {});
  const auto workers = workers_training(launcher, ckpt);
  ::kill(workers[1], SIGKILL);  // started second: rank 1
  const auto killed = std::chrono::steady_clock::now();
  RunResult r = launcher.wait();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  INFO(describe(r));
  CHECK(r.code != 0);
  CHECK(r.err.find("rank 1 of 2 is lost") != std::string::npos);
  CHECK(seconds < 45);
  // The newest checkpoint rank 0 wrote loads, in a run of one process.
  CheckpointDir dir(ckpt.string());
  const auto files = dir.list();
  REQUIRE(!files.empty());
  const std::int64_t newest = files.front().step;
  auto resumed = run_cli({"train", "--config", write_config(tmp.path(), ckpt, static_cast<int>(newest) + 10, 32),
                          "--resume"});
  INFO(describe(resumed));
  CHECK(resumed.code == 0);
  CHECK(resumed.err.find("(step " + std::to_string(newest) + ")") != std::string::npos);
}

TEST_CASE("train --nproc-per-node 2, Ctrl-C to rank 1 alone: every rank stops after the same step, rank 0 saves it") {
  TempDir tmp("accelkit-train-dist");
  const fs::path ckpt = tmp.path() / "ck";
  const std::string long_run = write_config(tmp.path(), ckpt, 1000000, 32);
  CliProcess launcher({"train", "--config", long_run, "--nproc-per-node", "2", "--dist-timeout", "20", "--json"}, {});
  const auto workers = workers_training(launcher, ckpt);
  ::kill(workers[1], SIGINT);  // what a guard stop on rank 1 alone also takes: rank 1's stop flag
  RunResult r = launcher.wait();
  INFO(describe(r));
  CHECK(r.code == 128 + SIGINT);
  CHECK(r.err.find("is lost") == std::string::npos);         // no rank waited for a collective
  CHECK(r.err.find("stopping the others") == std::string::npos);  // nobody was signalled by the launcher
  CHECK(r.err.find("(asked by rank 1; every rank stops after the same step)") != std::string::npos);
  // Rank 0 ended at the step every rank agreed on, and saved it.
  std::string last;  // rank 0's JSON lines; the last is the end of the run
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) last = line;
  const auto end = nlohmann::json::parse(last);
  REQUIRE(end.contains("interrupted_ranks"));
  CHECK(end["interrupted"] == true);
  CHECK(end["interrupted_ranks"] == nlohmann::json::array({1}));
  CHECK(end["guard_stopped_ranks"] == nlohmann::json::array());
  const auto stopped = end["step"].get<std::int64_t>();
  CheckpointDir dir(ckpt.string());
  const auto files = dir.list();
  REQUIRE(!files.empty());
  CHECK(files.front().step == stopped);
  auto resumed = run_cli({"train", "--config", write_config(tmp.path(), ckpt, static_cast<int>(stopped) + 5, 32),
                          "--resume", "--nproc-per-node", "2"});
  INFO(describe(resumed));
  CHECK(resumed.code == 0);
  CHECK(resumed.err.find("(step " + std::to_string(stopped) + ")") != std::string::npos);
}

namespace {

// A launcher's run that ended a signal's clean stop: rank 0's last JSON line says it was
// interrupted, every rank stopped after the same step (none was lost, none stopped by the
// launcher), and the newest checkpoint is of that step and loads. That step.
std::int64_t clean_stop_step(const RunResult& r, const fs::path& ckpt) {
  CHECK(r.err.find("is lost") == std::string::npos);
  CHECK(r.err.find("stopping the others") == std::string::npos);
  CHECK(r.err.find("killing the workers") == std::string::npos);
  CHECK(count(r.err, "stopping after this step to save a checkpoint") == 1);  // rank 0's
  std::string last;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) last = line;
  REQUIRE_FALSE(last.empty());
  const auto end = nlohmann::json::parse(last);
  REQUIRE(end["event"] == "end");
  CHECK(end["interrupted"] == true);
  const auto stopped = end["step"].get<std::int64_t>();
  CheckpointDir dir(ckpt.string());
  const auto files = dir.list();
  REQUIRE(!files.empty());
  CHECK(files.front().step == stopped);
  CHECK_NOTHROW(CheckpointDir::read(files.front().path));
  return stopped;
}

// Whether process `pid` is there and not a zombie (from /proc/<pid>/stat).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

}  // namespace

TEST_CASE("train --nproc-per-node 2, SIGINT to the launcher alone (a supervisor's): a clean stop, exit 130, resumable") {
  TempDir tmp("accelkit-train-dist");
  const fs::path ckpt = tmp.path() / "ck";
  const std::string long_run = write_config(tmp.path(), ckpt, 1000000, 32);
  CliProcess launcher({"train", "--config", long_run, "--nproc-per-node", "2", "--dist-timeout", "20", "--json"}, {});
  workers_training(launcher, ckpt);
  REQUIRE(::kill(launcher.pid(), SIGINT) == 0);
  const RunResult r = launcher.wait();
  INFO(describe(r));
  CHECK(r.code == 128 + SIGINT);
  const std::int64_t stopped = clean_stop_step(r, ckpt);
  CHECK(r.err.find("every rank stops after the same step) at step " + std::to_string(stopped)) != std::string::npos);
  auto resumed = run_cli({"train", "--config", write_config(tmp.path(), ckpt, static_cast<int>(stopped) + 5, 32),
                          "--resume"});
  INFO(describe(resumed));
  CHECK(resumed.code == 0);
  CHECK(resumed.err.find("(step " + std::to_string(stopped) + ")") != std::string::npos);
}

TEST_CASE("train --nproc-per-node 2, SIGINT to the whole process group (Ctrl-C): the launcher's copy makes no second stop") {
  // As the terminal does: every worker has the signal, and the launcher passes it on again.
  TempDir tmp("accelkit-train-dist");
  const fs::path ckpt = tmp.path() / "ck";
  const std::string long_run = write_config(tmp.path(), ckpt, 1000000, 32);
  CliProcess launcher({"train", "--config", long_run, "--nproc-per-node", "2", "--dist-timeout", "20", "--json"}, {});
  const auto workers = workers_training(launcher, ckpt);
  for (pid_t worker : workers) REQUIRE(::kill(worker, SIGINT) == 0);
  REQUIRE(::kill(launcher.pid(), SIGINT) == 0);
  const RunResult r = launcher.wait();
  INFO(describe(r));
  CHECK(r.code == 128 + SIGINT);
  clean_stop_step(r, ckpt);  // rank 0 stopped after the step and saved it: not killed by the second SIGINT
}

#ifdef POSIX_SPAWN_SETSID
// `accelkit args...` as CliProcess runs it, but a session of its own on a new pseudo-terminal
// whose foreground process group it is (stdin the terminal; stdout and stderr files): a Ctrl-C
// typed there is the terminal's SIGINT to it and its workers (si_code SI_KERNEL, from no process).
class OnTerminal {
 public:
  explicit OnTerminal(const std::vector<std::string>& args) : tmp_("accelkit-cli-tty") {
    master_ = ::posix_openpt(O_RDWR | O_NOCTTY);
    REQUIRE(master_ >= 0);
    REQUIRE(::grantpt(master_) == 0);
    REQUIRE(::unlockpt(master_) == 0);
    const std::string terminal = ::ptsname(master_);
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("ACCELKIT_", 0) != 0) env.emplace_back(*e);
    env.push_back("ACCELKIT_PLUGIN_PATH=" + cpu_plugin_dir());
    if (const char* cache = std::getenv("ACCELKIT_CACHE_DIR")) env.push_back(std::string("ACCELKIT_CACHE_DIR=") + cache);
    std::vector<std::string> argv_strings{kCli};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (auto& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    // Opened by a session leader, the terminal becomes its controlling terminal.
    posix_spawn_file_actions_addopen(&fa, 0, terminal.c_str(), O_RDWR, 0);
    posix_spawn_file_actions_addopen(&fa, 1, (tmp_.path() / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, (tmp_.path() / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int rc = posix_spawn(&pid_, kCli.c_str(), &fa, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    REQUIRE_MESSAGE(rc == 0, "posix_spawn " << kCli << ": " << std::strerror(rc));
  }
  ~OnTerminal() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    ::close(master_);
  }
  OnTerminal(const OnTerminal&) = delete;
  OnTerminal& operator=(const OnTerminal&) = delete;

  pid_t pid() const noexcept { return pid_; }
  // Ctrl-C typed on the terminal (its interrupt character, ^C, with ISIG on as a new one has it).
  void ctrl_c() { REQUIRE(::write(master_, "\x03", 1) == 1); }

  // Waits for the exit (killing it after `limit`: a Ctrl-C that stopped nothing).
  RunResult wait(std::chrono::seconds limit = std::chrono::seconds(120)) {
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    pid_t ended = 0;
    while ((ended = ::waitpid(pid_, &status, WNOHANG)) == 0 || (ended < 0 && errno == EINTR)) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    RunResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(tmp_.path() / "out");
    r.err = slurp(tmp_.path() / "err");
    return r;
  }

 private:
  TempDir tmp_;
  int master_ = -1;
  pid_t pid_ = -1;
};

TEST_CASE("train --nproc-per-node 2, Ctrl-C at its terminal: every process has it, one clean stop, exit 130") {
  TempDir tmp("accelkit-train-dist");
  const fs::path ckpt = tmp.path() / "ck";
  const std::string long_run = write_config(tmp.path(), ckpt, 1000000, 32);
  OnTerminal launcher({"train", "--config", long_run, "--nproc-per-node", "2", "--dist-timeout", "20", "--json"});
  workers_training(launcher.pid(), ckpt);
  launcher.ctrl_c();
  const RunResult r = launcher.wait();
  INFO(describe(r));
  CHECK(r.code == 128 + SIGINT);
  clean_stop_step(r, ckpt);  // not killed by the launcher's copy of the signal
}
#endif

TEST_CASE("train --nproc-per-node 2, SIGHUP to the launcher: stopped as by SIGTERM, exit 129") {
  TempDir tmp("accelkit-train-dist");
  const fs::path ckpt = tmp.path() / "ck";
  const std::string long_run = write_config(tmp.path(), ckpt, 1000000, 32);
  // SIGHUP as usual in the launcher, whatever this process was started with (nohup).
  struct sigaction usual {}, saved {};
  usual.sa_handler = SIG_DFL;
  sigemptyset(&usual.sa_mask);
  REQUIRE(::sigaction(SIGHUP, &usual, &saved) == 0);
  auto launcher = std::make_unique<CliProcess>(
      std::vector<std::string>{"train", "--config", long_run, "--nproc-per-node", "2", "--dist-timeout", "20", "--json"},
      EnvOverrides{});
  ::sigaction(SIGHUP, &saved, nullptr);
  workers_training(*launcher, ckpt);
  REQUIRE(::kill(launcher->pid(), SIGHUP) == 0);
  const RunResult r = launcher->wait();
  INFO(describe(r));
  CHECK(r.code == 128 + SIGHUP);
  clean_stop_step(r, ckpt);
}

TEST_CASE("train --nproc-per-node 2, SIGINT again to the launcher: within 3 s it kills the workers, later it does not") {
  TempDir tmp("accelkit-train-dist");
  const fs::path ckpt = tmp.path() / "ck";
  const std::string long_run = write_config(tmp.path(), ckpt, 1000000, 32);
  CliProcess launcher({"train", "--config", long_run, "--nproc-per-node", "2", "--dist-timeout", "20"}, {});
  const auto workers = workers_training(launcher, ckpt);
  // The workers held (SIGSTOP) so that no clean stop can end the run first.
  for (pid_t worker : workers) REQUIRE(::kill(worker, SIGSTOP) == 0);
  REQUIRE(::kill(launcher.pid(), SIGINT) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(3300));
  REQUIRE(::kill(launcher.pid(), SIGINT) == 0);  // 3.3 s later: passed on, nothing forced
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (pid_t worker : workers) CHECK(alive(worker));
  REQUIRE(::kill(launcher.pid(), SIGINT) == 0);  // 0.3 s later: the workers killed
  const RunResult r = launcher.wait();
  INFO(describe(r));
  CHECK(r.code == 128 + SIGINT);
  CHECK(count(r.err, "SIGINT again within 3 s: killing the workers") == 1);
  CHECK(r.err.find("stopping the others") == std::string::npos);
  for (pid_t worker : workers) CHECK_FALSE(alive(worker));
  // The checkpoints written before stay whole.
  CheckpointDir dir(ckpt.string());
  const auto files = dir.list();
  REQUIRE(!files.empty());
  CHECK_NOTHROW(CheckpointDir::read(files.front().path));
}

TEST_CASE("a thermal guard stop on rank 1 alone: every rank stops after the same step, rank 0 names it and saves") {
  // Two train processes under torchrun's variables, each reading its own sensors: rank 1's CPU
  // is at 95 C, rank 0's at 45 C (a host of its own, as on two machines).
  TempDir tmp("accelkit-train-dist");
  const fs::path ckpt = tmp.path() / "ck";
  const std::string cfg = write_config(tmp.path(), ckpt, 1000000, 32);
  auto sensors = [&](int rank, const char* millidegrees) {
    const fs::path hwmon = tmp.path() / ("sys" + std::to_string(rank)) / "class" / "hwmon" / "hwmon0";
    fs::create_directories(hwmon);
    write_file(hwmon / "name", "k10temp\n");
    write_file(hwmon / "temp1_label", "Tctl\n");
    write_file(hwmon / "temp1_input", millidegrees);
    return (tmp.path() / ("sys" + std::to_string(rank))).string();
  };
  const std::string port = std::to_string(free_loopback_port());
  std::vector<std::unique_ptr<CliProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank)
    ranks.push_back(std::make_unique<CliProcess>(
        std::vector<std::string>{"--guard-temperature", "80", "--guard-policy", "stop", "--guard-interval", "0.05",
                                 "train", "--config", cfg, "--dist-timeout", "20", "--json"},
        EnvOverrides{{"RANK", std::to_string(rank)}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"},
                     {"LOCAL_WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port},
                     {"ACCELKIT_SYSFS_ROOT", sensors(rank, rank == 1 ? "95000\n" : "45000\n")}}));
  const RunResult r0 = ranks[0]->wait(), r1 = ranks[1]->wait();
  INFO("rank 0: " << describe(r0));
  INFO("rank 1: " << describe(r1));
  CHECK(r0.code == 4);  // both end as a guard stop, rank 0 too, though its own sensor is cool
  CHECK(r1.code == 4);
  CHECK(r0.err.find("is lost") == std::string::npos);
  CHECK(r1.err.find("is lost") == std::string::npos);
  CHECK(r0.err.find("stopped by the thermal guard (asked by rank 1; every rank stops after the same step) at step") !=
        std::string::npos);
  std::string last;
  std::istringstream lines(r0.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) last = line;
  const auto end = nlohmann::json::parse(last);
  CHECK(end["guard_stopped"] == true);
  CHECK(end["guard_stopped_ranks"] == nlohmann::json::array({1}));
  CHECK(end["interrupted_ranks"] == nlohmann::json::array());
  CheckpointDir dir(ckpt.string());
  const auto files = dir.list();
  REQUIRE(!files.empty());
  CHECK(files.front().step == end["step"].get<std::int64_t>());
}

TEST_CASE("train --nproc-per-node: a batch that does not split is refused by every worker") {
  TempDir tmp("accelkit-train-dist");
  auto r = run_cli({"train", "--config", write_config(tmp.path(), tmp.path() / "ck", 5, 33), "--nproc-per-node", "2"});
  INFO(describe(r));
  CHECK(r.code == 2);
  CHECK(r.err.find("does not split into 2 ranks") != std::string::npos);
}

TEST_CASE("train --nproc-per-node: a collective backend the device cannot use is exit 3") {
  TempDir tmp("accelkit-train-dist");
  auto r = run_cli({"train", "--config", write_config(tmp.path(), tmp.path() / "ck", 5), "--nproc-per-node", "2",
                    "--dist-backend", "nccl"});
  INFO(describe(r));
  CHECK(r.code == 3);
  CHECK(r.err.find("dist_backend = nccl") != std::string::npos);
  CHECK(r.err.find("its plugin offers gloo") != std::string::npos);
}

TEST_CASE("report under a launcher's variables: the backend and each rank's share of the cores") {
  auto r = run_cli({"report"}, {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                                {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29999"}});
  INFO(describe(r));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("all-reduces with gloo") != std::string::npos);
  CHECK(r.out.find("launched by torchrun, rank 1 of 2, local rank 1 of 2") != std::string::npos);
  CHECK(r.out.find("shared by 2 local ranks") != std::string::npos);
  auto alone = run_cli({"report"});
  CHECK(alone.out.find("no launcher: one process") != std::string::npos);
  auto bad = run_cli({"report"}, {{"RANK", "3"}, {"WORLD_SIZE", "2"}});
  CHECK(bad.out.find("launcher variables unusable: RANK=3 is not below WORLD_SIZE=2") != std::string::npos);
}

}  // namespace train_dist_suite
