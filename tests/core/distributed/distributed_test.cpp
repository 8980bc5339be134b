// Data-parallel training (distributed.hpp): the launchers' environments, and real processes
// (tests/dist_worker.cpp) training over c10d's Gloo on loopback: 2 ranks equal 1 rank with the
// whole batch, no_sync accumulation, the loss scaler's agreement, a rank killed mid-run, a
// mismatched model, and a run under a real mpirun where one is installed.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <torch/data.h>

#include <doctest/doctest.h>

#include "accelkit/dist_sampler.hpp"
#include "accelkit/distributed.hpp"
#include "fixture_paths.hpp"
#include "test_support.hpp"

extern char** environ;

namespace distributed_suite {

using accelkit::dist::detect_launch;
using accelkit::dist::first_slurm_host;
using accelkit::dist::Launch;
using accelkit::dist::LaunchError;
using accelkit::test::TempDir;

accelkit::dist::EnvReader env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST_CASE("each launcher's environment gives rank, world, local rank and master") {
  struct Row {
    const char* what;
    std::map<std::string, std::string> env;
    Launch want;
  };
  const std::vector<Row> rows = {
      {"nothing", {}, {"none", 0, 1, 0, 1, "", 0, false, ""}},
      {"torchrun",
       {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "n01"},
        {"MASTER_PORT", "29400"}},
       {"torchrun", 3, 8, 1, 4, "n01", 29400, false, ""}},
      {"torchrun, one host, no LOCAL_WORLD_SIZE",
       {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "2"}},
       {"torchrun", 1, 2, 1, 2, "127.0.0.1", 2, false, ""}},
      {"slurm",
       {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}, {"SLURM_TASKS_PER_NODE", "4(x2)"},
        {"SLURM_JOB_NODELIST", "gpu[07-08]"}, {"SLURM_JOB_ID", "123456"}},
       {"slurm", 5, 8, 1, 4, "gpu07", 23456, false, ""}},
      {"slurm with MASTER_ADDR/PORT",
       {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_NTASKS_PER_NODE", "1"},
        {"SLURM_JOB_NODELIST", "a,b"}, {"MASTER_ADDR", "b"}, {"MASTER_PORT", "40000"}},
       {"slurm", 0, 2, 0, 1, "b", 40000, false, ""}},
      {"open mpi, one host",
       {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
       {"openmpi", 1, 2, 1, 2, "127.0.0.1", 29500, false, ""}},
      {"mpich / pmi",
       {{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "1"},
        {"MASTER_ADDR", "head"}},
       {"pmi", 2, 4, 0, 1, "head", 29500, false, ""}},
      {"torchrun, its agent hosting the store",
       {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29400"},
        {"TORCHELASTIC_USE_AGENT_STORE", "True"}},
       {"torchrun", 1, 2, 1, 2, "h", 29400, true, ""}},
      {"torchrun wins over an outer slurm",
       {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}},
       {"torchrun", 0, 1, 0, 1, "127.0.0.1", 29500, false, ""}},
  };
  for (const auto& row : rows) {
    CAPTURE(row.what);
    const Launch got = detect_launch(env_of(row.env));
    CHECK(got.launcher == row.want.launcher);
    CHECK(got.rank == row.want.rank);
    CHECK(got.world_size == row.want.world_size);
    CHECK(got.local_rank == row.want.local_rank);
    CHECK(got.local_world_size == row.want.local_world_size);
    CHECK(got.master_addr == row.want.master_addr);
    CHECK(got.master_port == row.want.master_port);
    CHECK(got.store_hosted == row.want.store_hosted);
    CHECK(!got.source.empty());
  }
}

TEST_CASE("a launcher's unusable variables are refused with the variable named") {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> bad = {
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2 is not below WORLD_SIZE=2"},
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK=x"},
      {{{"RANK", "0"}}, "WORLD_SIZE is not"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT=70000"},
      {{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
       "set MASTER_ADDR"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n[1-"}}, "not a Slurm node list"},
  };
  for (const auto& [env, words] : bad) {
    CAPTURE(words);
    try {
      detect_launch(env_of(env));
      FAIL("accepted");
    } catch (const LaunchError& e) {
      CHECK(std::string(e.what()).find(words) != std::string::npos);
    }
  }
}

TEST_CASE("the first host of a Slurm node list") {
  CHECK(first_slurm_host("node07") == "node07");
  CHECK(first_slurm_host("a,b") == "a");
  CHECK(first_slurm_host("node[07-09,12],gpu01") == "node07");
  CHECK(first_slurm_host("rack1-n[003-004]") == "rack1-n003");
  CHECK(first_slurm_host("x[5]") == "x5");
  CHECK_THROWS_AS(first_slurm_host(""), LaunchError);
  CHECK_THROWS_AS(first_slurm_host("n[a-b]"), LaunchError);
  CHECK_THROWS_AS(first_slurm_host("n]1["), LaunchError);
}

TEST_CASE("ShardSampler: disjoint shards that cover the dataset, reshuffled per epoch alike on every rank") {
  auto shards = [](std::size_t size, std::size_t world, std::size_t epoch, bool drop_last) {
    std::vector<std::vector<std::size_t>> out;
    for (std::size_t r = 0; r < world; ++r) {
      accelkit::ShardSampler s(size, world, r, 42, true, drop_last);
      s.set_epoch(epoch);
      s.reset();
      std::vector<std::size_t> got;
      while (auto b = s.next(4)) got.insert(got.end(), b->begin(), b->end());
      CHECK(got == s.indices());
      out.push_back(got);
    }
    return out;
  };
  // 12 over 3 ranks: 4 each, disjoint, all of them.
  auto a = shards(12, 3, 0, false);
  std::vector<std::size_t> all;
  for (const auto& s : a) {
    CHECK(s.size() == 4);
    all.insert(all.end(), s.begin(), s.end());
  }
  std::sort(all.begin(), all.end());
  for (std::size_t i = 0; i < 12; ++i) CHECK(all[i] == i);
  // Another epoch, another order; the same epoch again, the same order.
  CHECK(shards(12, 3, 1, false) != a);
  CHECK(shards(12, 3, 0, false) == a);
  // 10 over 3: padded to 12 (each index at least once, 2 repeated) or cut to 9.
  auto padded = shards(10, 3, 0, false);
  std::vector<std::size_t> seen;
  for (const auto& s : padded) {
    CHECK(s.size() == 4);
    seen.insert(seen.end(), s.begin(), s.end());
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  CHECK(seen.size() == 10);
  for (const auto& s : shards(10, 3, 0, true)) CHECK(s.size() == 3);
  // Unshuffled: rank r takes r, r + world, ...
  accelkit::ShardSampler plain(7, 2, 1, 0, false, false);
  CHECK(plain.indices() == std::vector<std::size_t>{1, 3, 5, 0});
  CHECK_THROWS_AS(accelkit::ShardSampler(5, 2, 2), std::invalid_argument);
}

TEST_CASE("ShardSampler feeds torch::data's loader") {
  struct Numbers : torch::data::datasets::Dataset<Numbers> {
    torch::data::Example<> get(std::size_t i) override {
      return {at::full({1}, static_cast<double>(i)), at::zeros({1})};
    }
    torch::optional<std::size_t> size() const override { return 20; }
  };
  std::vector<double> got;
  for (std::size_t r = 0; r < 2; ++r) {
    auto loader = torch::data::make_data_loader(Numbers{}.map(torch::data::transforms::Stack<>()),
                                                accelkit::ShardSampler(20, 2, r, 7), 3);
    for (auto& batch : *loader)
      for (std::int64_t i = 0; i < batch.data.size(0); ++i) got.push_back(batch.data[i].item<double>());
  }
  std::sort(got.begin(), got.end());
  REQUIRE(got.size() == 20);
  for (std::size_t i = 0; i < 20; ++i) CHECK(got[i] == static_cast<double>(i));
}

// ---- real processes ------------------------------------------------------------------------

struct Proc {
  pid_t pid = -1;
  std::string out, err;
  int status = -1;
  double seconds = 0;
};

// Starts `argv` with the current environment less any launcher's variables, plus `extra`.
Proc spawn(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra, const TempDir& dir,
           const std::string& name) {
  static const char* launcher_vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                        "MASTER_PORT", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    const std::string key = kv.substr(0, kv.find('='));
    bool drop = false;
    for (const char* v : launcher_vars) drop = drop || key == v;
    if (!drop) env.push_back(kv);
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  Proc p;
  p.out = (dir.path() / (name + ".out")).string();
  p.err = (dir.path() / (name + ".err")).string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, p.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, p.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int rc = posix_spawn(&p.pid, args[0].c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE_MESSAGE(rc == 0, "posix_spawn " << args[0] << ": " << std::strerror(rc));
  return p;
}

// Waits for every process, at most `limit` seconds in all; kills what is left then.
void wait_all(std::vector<Proc>& ps, double limit) {
  const auto start = std::chrono::steady_clock::now();
  std::size_t left = ps.size();
  while (left > 0) {
    for (auto& p : ps) {
      if (p.status != -1) continue;
      int st = 0;
      if (::waitpid(p.pid, &st, WNOHANG) == p.pid) {
        p.status = st;
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        --left;
      }
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit) {
      for (auto& p : ps)
        if (p.status == -1) {
          ::kill(p.pid, SIGKILL);
          ::waitpid(p.pid, &p.status, 0);
          p.seconds = limit;
        }
      FAIL("processes still running after " << limit << " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<float> floats(const std::string& path) {
  const std::string bytes = slurp(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

bool exited_ok(const Proc& p) { return WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0; }

struct Run {
  std::vector<Proc> procs;
  std::vector<std::string> outs;  // parameter files by rank
};

// `ranks` workers with torchrun's variables (1: no launcher at all).
Run run_workers(const TempDir& dir, const std::string& tag, int ranks, std::vector<std::string> args,
                double limit = 120) {
  Run r;
  const std::string port = std::to_string(accelkit::test::free_loopback_port());
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string out = (dir.path() / (tag + "-" + std::to_string(rank) + ".bin")).string();
    std::vector<std::string> a{ACCELKIT_DIST_WORKER, "--out", out};
    a.insert(a.end(), args.begin(), args.end());
    std::map<std::string, std::string> env;
    if (ranks > 1)
      env = {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", std::to_string(ranks)},
             {"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", std::to_string(ranks)},
             {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}};
    r.procs.push_back(spawn(a, env, dir, tag + "-" + std::to_string(rank)));
    r.outs.push_back(out);
  }
  wait_all(r.procs, limit);
  return r;
}

void require_ok(const Run& r) {
  for (const auto& p : r.procs) {
    INFO("stderr: " << slurp(p.err) << " stdout: " << slurp(p.out));
    REQUIRE(exited_ok(p));
  }
}

// max |a - b| / max |b|: the parameters' difference relative to their scale. (Element by
// element it is not a measure of the reduction: AdamW moves a weight by about lr * sign(g),
// and a gradient within rounding of zero may take either sign in sums of different order.)
double max_relative(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / scale;
}

TEST_CASE("2 ranks with half the batch each equal 1 rank with all of it; the ranks agree bit for bit") {
  TempDir dir("accelkit-dist");
  Run one = run_workers(dir, "one", 1, {"--steps", "20", "--batch", "32"});
  require_ok(one);
  Run two = run_workers(dir, "two", 2, {"--steps", "20", "--batch", "32"});
  require_ok(two);
  const auto ref = floats(one.outs[0]), r0 = floats(two.outs[0]), r1 = floats(two.outs[1]);
  REQUIRE(ref.size() == 32 * 64 + 64 + 64 * 64 + 64 + 64 * 8 + 8);
  CHECK(r0 == r1);
  const double rel = max_relative(r0, ref);
  MESSAGE("20 AdamW steps, 2 ranks vs 1: max relative difference " << rel);
  CHECK(rel < 1e-5);
  // The reference moved away from its start, so equality is not trivial.
  Run still = run_workers(dir, "still", 1, {"--steps", "0"});
  require_ok(still);
  CHECK(max_relative(floats(still.outs[0]), ref) > 1e-2);
  // 2 ranks on this host share its cores.
  const std::string says = slurp(two.procs[0].out);
  INFO(says);
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores >= 2) CHECK(says.find("threads " + std::to_string(cores / 2) + " ") != std::string::npos);
  CHECK(says.find("rank 0 of 2") != std::string::npos);
  // Where the plugin offers several AdamW implementations, every rank steps with rank 0's
  // choice: measured on each rank alone, on a busy machine, the ranks chose differently and
  // their weights drifted apart in the last bits.
  std::vector<std::string> chosen;
  for (const auto& p : two.procs) {
    const std::string out = slurp(p.out);
    const auto at = out.find("adamw ");
    if (at == std::string::npos) continue;  // one implementation: nothing to agree on
    const std::string line = out.substr(at, out.find('\n', at) - at);
    INFO(line);
    CHECK((line.find("rank 0 chose the same, which every rank takes") != std::string::npos ||
           line.find("rank 0's choice, which every rank of a data-parallel run takes") != std::string::npos));
    chosen.push_back(line.substr(0, line.find(':')));
  }
  if (chosen.size() == 2) CHECK(chosen[0] == chosen[1]);
}

TEST_CASE("a world of one with group_of_one runs the reducer and every collective, and trains as without a group") {
  TempDir dir("accelkit-dist");
  Run plain = run_workers(dir, "plain", 1, {"--steps", "10", "--batch", "16"});
  require_ok(plain);
  Run grouped = run_workers(dir, "grouped", 1, {"--steps", "10", "--batch", "16", "--group-of-one", "1"});
  require_ok(grouped);
  const std::string p = slurp(plain.procs[0].out), g = slurp(grouped.procs[0].out);
  INFO(p << g);
  CHECK(p.find("buckets 0") != std::string::npos);  // no group: plain backward
  CHECK(g.find("rank 0 of 1") != std::string::npos);
  CHECK(g.find("buckets 1") != std::string::npos);  // the reducer ran
  CHECK(g.find("backend gloo: the cpu:0 plugin's collective backend (collectives = gloo), made by accelkit") !=
        std::string::npos);
  // A mean over one rank is the gradient itself: the same weights.
  CHECK(max_relative(floats(grouped.outs[0]), floats(plain.outs[0])) < 1e-6);
  // With sockets to peers, SIGPIPE is ignored (a peer dying mid-write must fail the collective,
  // not end this rank); without, it is left alone, as is a handler the program installed.
  CHECK(p.find("sigpipe default") != std::string::npos);
  CHECK(g.find("sigpipe ignored") != std::string::npos);
  Run own = run_workers(dir, "own", 1, {"--steps", "2", "--batch", "16", "--group-of-one", "1", "--own-sigpipe", "1"});
  require_ok(own);
  const std::string o = slurp(own.procs[0].out);
  INFO(o);
  CHECK(o.find("sigpipe own handler") != std::string::npos);
}

TEST_CASE("a process group the device's plugin makes: 2 ranks over it equal 1 rank with all of it") {
  TempDir dir("accelkit-dist");
  const std::string plugin = accelkit::test::fixture_dir("honest-groups");
  const std::vector<std::string> args{"--steps", "10", "--batch", "32", "--device", "honest-groups",
                                      "--plugin-dir", plugin};
  Run one = run_workers(dir, "one", 1, args);
  require_ok(one);
  Run two = run_workers(dir, "two", 2, args);
  require_ok(two);
  const auto ref = floats(one.outs[0]), r0 = floats(two.outs[0]), r1 = floats(two.outs[1]);
  CHECK(r0 == r1);
  CHECK(max_relative(r0, ref) < 1e-5);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string says = slurp(two.procs[static_cast<std::size_t>(rank)].out);
    INFO(says);
    CHECK(says.find("made by the honest-groups:0 plugin") != std::string::npos);
    // What the plugin was asked: its backend, this rank of 2, dist_timeout (30 s), the device.
    CHECK(says.find("fixture group gloo " + std::to_string(rank) + "/2 30000 ms cpu") != std::string::npos);
  }
}

TEST_CASE("a plugin that cannot make its process group stops the run with its reason, on every rank") {
  TempDir dir("accelkit-dist");
  const std::string plugin = accelkit::test::fixture_dir("honest-groups");
  ::setenv("ACCELKIT_FIXTURE_GROUP_FAIL", "no interconnect on this test bench", 1);
  Run two = run_workers(dir, "refused", 2, {"--steps", "2", "--device", "honest-groups", "--plugin-dir", plugin}, 60);
  ::unsetenv("ACCELKIT_FIXTURE_GROUP_FAIL");
  for (const auto& p : two.procs) {
    const std::string err = slurp(p.err);
    INFO(err);
    CHECK((WIFEXITED(p.status) && WEXITSTATUS(p.status) == 3));
    CHECK(err.find("dist_backend gloo on honest-groups:0: the plugin could not make the process group: fixture: "
                   "no interconnect on this test bench") != std::string::npos);
  }
}

TEST_CASE("no_sync accumulation over 2 micro-batches equals the unaccumulated batch") {
  TempDir dir("accelkit-dist");
  Run one = run_workers(dir, "one", 1, {"--steps", "10", "--batch", "32"});
  require_ok(one);
  Run acc = run_workers(dir, "acc", 2, {"--steps", "10", "--batch", "32", "--accumulate", "2"});
  require_ok(acc);
  const auto ref = floats(one.outs[0]), r0 = floats(acc.outs[0]), r1 = floats(acc.outs[1]);
  CHECK(r0 == r1);
  const double rel = max_relative(r0, ref);
  MESSAGE("no_sync x2 vs one batch: max relative difference " << rel);
  CHECK(rel < 1e-5);
}

TEST_CASE("with master weights (bf16 model, fp32 master in the fused AdamW) the ranks agree bit for bit") {
  TempDir dir("accelkit-dist");
  Run one = run_workers(dir, "one", 1, {"--steps", "10", "--master-weights", "1"});
  require_ok(one);
  Run two = run_workers(dir, "two", 2, {"--steps", "10", "--master-weights", "1"});
  require_ok(two);
  const auto ref = floats(one.outs[0]), r0 = floats(two.outs[0]), r1 = floats(two.outs[1]);
  CHECK(r0 == r1);
  REQUIRE(slurp(one.procs[0].out).find("bf16 params") != std::string::npos);
  // bf16 activations and gradients: the runs agree to bf16's rounding, not fp32's, and AdamW
  // turns a rounding-sized gradient into a step of lr either way. So on average, not per weight.
  double diff = 0, size = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    diff += std::abs(double(r0[i]) - double(ref[i]));
    size += std::abs(double(ref[i]));
  }
  MESSAGE("master weights, 2 ranks vs 1 after 10 steps: mean |difference| / mean |weight| = " << diff / size
                                                                                                 << ", max relative "
                                                                                                 << max_relative(r0, ref));
  CHECK(diff / size < 1e-2);
  CHECK(slurp(two.procs[0].out).find("bf16 params") != std::string::npos);
}

TEST_CASE("step tuning in a data-parallel run: the ranks observe at their shared threads and keep one choice") {
  TempDir dir("accelkit-dist");
  Run two = run_workers(dir, "tune", 2, {"--steps", "60", "--step-tuning", "1"});
  require_ok(two);
  CHECK(floats(two.outs[0]) == floats(two.outs[1]));  // a step or two on different candidates changes nothing
  std::vector<std::string> lines;
  for (const auto& p : two.procs) {
    const std::string out = slurp(p.out);
    const auto at = out.find("step tuning: ");
    REQUIRE_MESSAGE(at != std::string::npos, out);
    lines.push_back(out.substr(at, out.find('\n', at) - at));
  }
  INFO(lines[0]);
  INFO(lines[1]);
  if (lines[0].find("nothing to choose") != std::string::npos) {
    MESSAGE("skipped: this CPU's plan leaves step tuning nothing to choose between at 1 thread a rank");
    return;
  }
  CHECK(lines[0].rfind("step tuning: decided | ", 0) == 0);
  CHECK(lines[0] == lines[1]);  // the same choice, source and reasons on both ranks
  CHECK(lines[0].find("of each of 2 ranks") != std::string::npos);
  CHECK(lines[0].find("mean over 2 ranks") != std::string::npos);
  // The candidates run at the rank's share of the cores.
  const unsigned each = std::max(1u, std::thread::hardware_concurrency() / 2);
  CHECK(lines[0].find(", " + std::to_string(each) + (each == 1 ? " thread" : " threads")) != std::string::npos);
}

TEST_CASE("a gradient overflow on one rank makes every rank skip that step") {
  TempDir dir("accelkit-dist");
  Run r = run_workers(dir, "inf", 2, {"--steps", "6", "--inf-at", "3", "--inf-rank", "1"});
  require_ok(r);
  CHECK(slurp(r.procs[0].out).find("skipped 1 ") != std::string::npos);
  CHECK(slurp(r.procs[1].out).find("skipped 1 ") != std::string::npos);
  CHECK(floats(r.outs[0]) == floats(r.outs[1]));
}

TEST_CASE("a rank killed mid-run: the survivor stops within the timeout and names it") {
  TempDir dir("accelkit-dist");
  Run r = run_workers(dir, "kill", 2, {"--steps", "200", "--die-at", "5", "--die-rank", "1", "--timeout", "20"}, 60);
  CHECK(WIFSIGNALED(r.procs[1].status));
  const std::string err = slurp(r.procs[0].err);
  INFO(err);
  CHECK(WIFEXITED(r.procs[0].status));
  CHECK(WEXITSTATUS(r.procs[0].status) == 3);
  CHECK(err.find("rank 1 of 2 is lost") != std::string::npos);
  CHECK(r.procs[0].seconds < 40);
}

TEST_CASE("a rank that hangs: the survivor stops after dist_timeout and names it") {
  TempDir dir("accelkit-dist");
  // Rank 1 stops itself (SIGSTOP) at step 5: its collectives and its heartbeat stop with it.
  const auto start = std::chrono::steady_clock::now();
  Run r;
  {
    const std::string port = std::to_string(accelkit::test::free_loopback_port());
    for (int rank = 0; rank < 2; ++rank) {
      const std::string out = (dir.path() / ("hang-" + std::to_string(rank) + ".bin")).string();
      r.procs.push_back(spawn({ACCELKIT_DIST_WORKER, "--out", out, "--steps", "200", "--hang-at", "5", "--die-rank",
                               "1", "--timeout", "5"},
                              {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", std::to_string(rank)},
                               {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}},
                              dir, "hang-" + std::to_string(rank)));
    }
    struct Reap {  // the stopped rank is killed whatever happens to the test
      pid_t pid;
      ~Reap() {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    } reap{r.procs[1].pid};
    std::vector<Proc> survivor{r.procs[0]};
    wait_all(survivor, 60);
    r.procs[0] = survivor[0];
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string err = slurp(r.procs[0].err);
  INFO(err);
  CHECK(WIFEXITED(r.procs[0].status));
  CHECK(WEXITSTATUS(r.procs[0].status) == 3);
  CHECK(err.find("rank 1 of 2 is lost") != std::string::npos);
  CHECK(seconds < 40);
}

TEST_CASE("ranks with different models are refused before training") {
  TempDir dir("accelkit-dist");
  Run r = run_workers(dir, "wide", 2, {"--steps", "3", "--wider-rank", "1"});
  for (const auto& p : r.procs) {
    const std::string err = slurp(p.err);
    INFO(err);
    CHECK(WIFEXITED(p.status));
    CHECK(WEXITSTATUS(p.status) == 3);
    CHECK(err.find("rank 1's model differs from rank 0's") != std::string::npos);
  }
}

// A launcher (mpirun, torchrun) starting 2 workers through `sh -c`, each writing
// <tag>-<its rank>.bin, the rank read from the variable `rank_var` the launcher sets: both ranks
// bit-identical and equal to 1 rank with the whole batch. Returns the launcher's output.
std::string check_launched(const TempDir& dir, const std::string& tag, std::vector<std::string> launcher,
                           const std::string& rank_var, const std::map<std::string, std::string>& env) {
  Run one = run_workers(dir, "one", 1, {"--steps", "5", "--batch", "32"});
  require_ok(one);
  const std::string prefix = (dir.path() / (tag + "-")).string();
  launcher.insert(launcher.end(), {"sh", "-c", std::string(ACCELKIT_DIST_WORKER) + " --steps 5 --batch 32 --out " +
                                                   prefix + "$" + rank_var + ".bin"});
  std::vector<Proc> ps{spawn(launcher, env, dir, tag)};
  wait_all(ps, 120);
  const std::string out = slurp(ps[0].out);
  INFO("stdout: " << out << " stderr: " << slurp(ps[0].err));
  REQUIRE(exited_ok(ps[0]));
  const auto r0 = floats(prefix + "0.bin"), r1 = floats(prefix + "1.bin");
  CHECK(r0 == r1);
  CHECK(max_relative(r0, floats(one.outs[0])) < 1e-5);
  CHECK(out.find("rank 1 of 2") != std::string::npos);
  return out;
}

TEST_CASE("under a real mpirun (Open MPI's environment)") {
  const char* candidates[] = {"/usr/bin/mpirun", "/usr/local/bin/mpirun"};
  std::string mpirun;
  for (const char* c : candidates)
    if (::access(c, X_OK) == 0) mpirun = c;
  if (mpirun.empty()) {
    MESSAGE("skipped: no mpirun installed (Debian's openmpi-bin provides one)");
    return;
  }
  TempDir dir("accelkit-dist");
  const std::string port = std::to_string(accelkit::test::free_loopback_port());
  const std::string out = check_launched(
      dir, "mpi", {mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "MASTER_PORT=" + port},
      "OMPI_COMM_WORLD_RANK", {{"OMPI_MCA_plm_rsh_agent", ""}});
  CHECK(out.find("launcher openmpi") != std::string::npos);
}

TEST_CASE("under a real torchrun (PyTorch's launcher), its agent hosting the store") {
#ifdef ACCELKIT_TORCHRUN
  const std::string torchrun = ACCELKIT_TORCHRUN;
#else
  const std::string torchrun;
#endif
  if (torchrun.empty() || ::access(torchrun.c_str(), X_OK) != 0) {
    MESSAGE("skipped: no torchrun beside this build's LibTorch (the PyTorch wheel's, or Debian's python3-torch)");
    return;
  }
  TempDir dir("accelkit-dist");
  // Underscore spellings: Debian's python3-torch (1.13) has only those; 2.x takes both.
  // First the launcher alone, with `true` as its worker: Debian 12's torchrun (1.13 under
  // Python 3.11) dies in its own code before it starts any worker ("'NoneType' object has no
  // attribute 'get'" in torch.distributed.elastic), which says nothing about accelkit.
  {
    std::vector<Proc> probe{spawn({torchrun, "--standalone", "--nproc_per_node", "1", "--no_python", "true"}, {}, dir,
                                  "torchrun-probe")};
    wait_all(probe, 60);
    if (!exited_ok(probe[0])) {
      const std::string err = slurp(probe[0].err);
      const auto last = err.find_last_not_of('\n');
      const auto from = err.rfind('\n', last == std::string::npos ? 0 : last);
      MESSAGE("skipped: " << torchrun << " cannot start a worker of its own (`true`): "
                          << (from == std::string::npos ? err : err.substr(from + 1)));
      return;
    }
  }
  const std::string out =
      check_launched(dir, "torchrun", {torchrun, "--standalone", "--nproc_per_node", "2", "--no_python"}, "RANK", {});
  CHECK(out.find("launcher torchrun") != std::string::npos);
}

}  // namespace distributed_suite
