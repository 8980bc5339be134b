// Memory and heat through the CLI: `train --batch auto` (the finder's decision shown, cached,
// listed by `report`), a model that fits at no batch (exit 1, nothing written), `bench --batch
// auto:MAX`, the thermal guard stopping `train` on a fixture sensor (exit 4 after a checkpoint,
// then --resume), and the run's metrics.jsonl and report.html.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "cli_process.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace cli_memory_suite {

using namespace accelkit::test;
using nlohmann::json;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

std::string train_config(const fs::path& dir, const std::string& train_extra = "") {
  const fs::path cfg = dir / "train.toml";
  write(cfg, "device = \"cpu\"\nthreads = 1\n\n[train]\nsteps = 6\nwidth = 16\ndepth = 1\noutputs = 4\nlog_every = 3\n"
             "checkpoint_dir = \"" + (dir / "run").string() + "\"\n" + train_extra);
  return cfg.string();
}

std::vector<json> json_lines(const std::string& out) {
  std::vector<json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(json::parse(line));
  return v;
}

}  // namespace

TEST_CASE("train --batch auto:MAX: the finder's batch, its trials, the cache on the second run, report lists it") {
  TempDir tmp("accelkit-cli-batch");
  const EnvOverrides env = {{"ACCELKIT_CACHE_DIR", (tmp.path() / "cache").string()}};
  const std::string cfg = train_config(tmp.path());
  const RunResult first = run_cli({"train", "--config", cfg, "--batch", "auto:256", "--json"}, env);
  REQUIRE_MESSAGE(first.code == 0, describe(first));
  const json start = json_lines(first.out).front();
  REQUIRE(start["event"] == "start");
  const json& d = start["batch_finder"];
  CHECK(d["origin"] == "measured");
  CHECK(d["method"] == "fit");
  CHECK(d["largest"] == 256);  // a width-16 MLP fits far more: MAX bounds it
  CHECK(start["batch_size"] == 256);
  CHECK(d["trials"].size() >= 2);
  CHECK(d["budget_bytes"].get<double>() > 0);

  fs::remove_all(tmp.path() / "run");
  const RunResult second = run_cli({"train", "--config", cfg, "--batch", "auto:256"}, env);
  REQUIRE_MESSAGE(second.code == 0, describe(second));
  CHECK(has(second.err, "Batch size: 256 (batch finder cache " + (tmp.path() / "cache" / "batch").string()));
  CHECK_FALSE(has(second.err, "  batch 1: fits"));  // no trial ran

  // With a batch the user set: the micro-batches that reach it.
  fs::remove_all(tmp.path() / "run");
  const RunResult target = run_cli({"--batch-size", "1000", "train", "--config", cfg, "--batch", "auto:256"}, env);
  REQUIRE_MESSAGE(target.code == 0, describe(target));
  CHECK(has(target.err, "batch 1000 in 4 micro-batches"));
  CHECK(has(target.err, "250 x 4 accumulation steps = 1000"));

  const RunResult report = run_cli({"report", "--json"}, env);
  REQUIRE_MESSAGE(report.code == 0, describe(report));
  const json listed = json::parse(report.out)["batch_finder"];
  REQUIRE(listed["decisions"].size() == 1);
  CHECK(listed["decisions"][0]["largest"] == 256);
  const RunResult text = run_cli({"report"}, env);
  CHECK(has(text.out, "Batch-size finder: cache "));
  CHECK(has(text.out, "train MLP 1x16 -> 4"));
}

TEST_CASE("train --batch auto with a model that fits at no batch: exit 1 naming the memory, nothing written") {
  TempDir tmp("accelkit-cli-batch");
  // Gradients and AdamW's moments of 8192-wide layers: 805 MB each; more layers than a tenth of
  // this machine's memory holds, with memory_margin 90 leaving at most that tenth.
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double total_kb = 0;
  while (meminfo >> key && key != "MemTotal:") meminfo.ignore(256, '\n');
  meminfo >> total_kb;
  REQUIRE(total_kb > 0);
  const int depth = static_cast<int>(std::ceil(0.1 * total_kb * 1024 / 805e6)) + 1;
  const fs::path cfg = tmp.path() / "big.toml";
  write(cfg, "device = \"cpu\"\nmemory_margin = 90\n\n[train]\nsteps = 2\nwidth = 8192\ndepth = " +
                 std::to_string(depth) + "\noutputs = 2\ncheckpoint_dir = \"" + (tmp.path() / "run").string() + "\"\n");
  const RunResult r = run_cli({"train", "--config", cfg.string(), "--batch", "auto"},
                              {{"ACCELKIT_CACHE_DIR", (tmp.path() / "cache").string()}});
  CHECK_MESSAGE(r.code == 1, describe(r));
  CHECK(has(r.err, "--batch auto: "));
  CHECK((has(r.err, "alone need") || has(r.err, "no memory left to train in")));
  CHECK(has(r.err, "nothing was trained or written"));
  CHECK_FALSE(fs::exists(tmp.path() / "run"));
  CHECK_FALSE(fs::exists(tmp.path() / "cache" / "batch"));
}

TEST_CASE("--batch: a number, auto or auto:MAX, for bench and train only") {
  for (const char* bad : {"0", "-3", "auto:", "auto:0", "lots", "auto:x"}) {
    CAPTURE(bad);
    const RunResult r = run_cli({"bench", "--batch", bad});
    CHECK_MESSAGE(r.code == 2, describe(r));
    CHECK(has(r.err, "--batch"));
  }
  const RunResult info = run_cli({"info", "--batch", "auto"});
  CHECK(info.code == 2);
  CHECK(has(info.err, "--batch is an option of 'bench' and 'train'"));
  const RunResult optimizer = run_cli({"bench", "--model", "optimizer", "--batch", "auto"});
  CHECK(optimizer.code == 2);
}

TEST_CASE("bench --batch auto:MAX: every variant at the finder's batch, the decision in the JSON") {
  TempDir tmp("accelkit-cli-batch");
  const RunResult r = run_cli({"--threads", "1", "bench", "--model", "mlp", "--width", "32", "--batch", "auto:64", "--steps", "2",
                               "--warmup", "1", "--json"},
                              {{"ACCELKIT_CACHE_DIR", (tmp.path() / "cache").string()}});
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  const json j = json::parse(r.out);
  CHECK(j["batch"] == 64);
  CHECK(j["batch_finder"]["largest"] == 64);
  CHECK(j["batch_finder"]["origin"] == "measured");
  CHECK(has(j["shape"].get<std::string>(), "batch 64"));
}

TEST_CASE("the thermal guard stops train on a hot sensor (exit 4, checkpoint); --resume finishes once cool") {
  TempDir tmp("accelkit-cli-guard");
  const fs::path hwmon = tmp.path() / "sys" / "class" / "hwmon" / "hwmon0";
  fs::create_directories(hwmon);
  write(hwmon / "name", "k10temp\n");
  write(hwmon / "temp1_label", "Tctl\n");
  write(hwmon / "temp1_input", "95000\n");
  const EnvOverrides env = {{"ACCELKIT_SYSFS_ROOT", (tmp.path() / "sys").string()}};
  const std::string cfg = train_config(tmp.path());
  const std::vector<std::string> guard = {"--guard-temperature", "80", "--guard-policy", "stop", "--guard-interval", "0.05"};
  std::vector<std::string> args = guard;
  for (const char* a : {"train", "--config"}) args.emplace_back(a);
  args.push_back(cfg);
  const RunResult hot = run_cli(args, env);
  CHECK_MESSAGE(hot.code == 4, describe(hot));
  CHECK(has(hot.err, "thermal guard: every 0.05 s on cpu:0; stop at 80.0 C (guard_temperature)"));
  CHECK(has(hot.err, "95.0 C reached the threshold 80.0 C: stopping (step 1)"));
  CHECK(has(hot.err, "stopped by the thermal guard at step 1 of 6"));
  CHECK(fs::exists(tmp.path() / "run" / "step-00000001.ckpt"));
  CHECK(fs::exists(tmp.path() / "run" / "report.html"));
  CHECK(has(slurp(tmp.path() / "run" / "metrics.jsonl"), "\"stop: cpu:0: 95.0 C reached"));

  write(hwmon / "temp1_input", "45000\n");
  args.push_back("--resume");
  args.push_back("--json");
  const RunResult cool = run_cli(args, env);
  REQUIRE_MESSAGE(cool.code == 0, describe(cool));
  const json end = json_lines(cool.out).back();
  CHECK(end["step"] == 6);
  CHECK(end["start_step"] == 1);
  CHECK(end["guard_stopped"] == false);
  CHECK(end["report"] == (tmp.path() / "run" / "report.html").string());
  // The metrics hold every step once, in both segments.
  const std::string metrics = slurp(tmp.path() / "run" / "metrics.jsonl");
  int runs = 0, steps = 0;
  for (const json& line : json_lines(metrics)) {
    if (line.value("event", "") == "run") ++runs;
    if (line.contains("step")) ++steps;
  }
  CHECK(runs == 2);
  CHECK(steps == 6);

  const RunResult absurd = run_cli({"--guard-temperature", "10", "train", "--config", cfg});
  CHECK(absurd.code == 2);
  CHECK(has(absurd.err, "room temperature"));
}

#ifdef ACCELKIT_TEST_ROCM_PLUGIN
constexpr bool kRocmPlugin = true;
#else
constexpr bool kRocmPlugin = false;  // configured with ACCELKIT_PLUGIN_ROCM=OFF
#endif

TEST_CASE("monitor --all samples every device the plugins list, one LibTorch here cannot train on included" *
          doctest::skip(!kRocmPlugin)) {
  // An AMD card (sysfs fixture) beside this process's CPU-only LibTorch: listed, not usable, watched.
  const EnvOverrides env = {{"ACCELKIT_PLUGIN_PATH", private_plugin_dir({"cpu", "rocm"})},
                            {"ACCELKIT_SYSFS_ROOT", std::string(ACCELKIT_TEST_FIXTURES) + "/rocm/rdna3/sys"}};
  const RunResult r = run_cli({"monitor", "--all", "--count", "2", "--interval", "0.1", "--json"}, env);
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  std::map<std::string, int> samples;
  for (const json& line : json_lines(r.out)) {
    const std::string id = line["device"];
    ++samples[id];
    if (id == "rocm:0") CHECK(line["readings"]["temperature_c"]["value"] == 63.0);
  }
  CHECK(samples["cpu:0"] == 2);
  CHECK(samples["rocm:0"] == 2);
  const RunResult text = run_cli({"monitor", "--all", "--count", "1"}, env);
  REQUIRE_MESSAGE(text.code == 0, describe(text));
  CHECK(has(text.out, "Monitoring 2 devices"));
  CHECK(has(text.out, "  rocm:0  AMD GPU"));
  const RunResult single = run_cli({"monitor", "--count", "1", "--json"}, env);  // without --all: the selected one
  REQUIRE_MESSAGE(single.code == 0, describe(single));
  CHECK(json_lines(single.out).size() == 1);
  CHECK(json_lines(single.out)[0]["device"] == "cpu:0");
  CHECK(run_cli({"info", "--all"}).code == 2);
}

}  // namespace cli_memory_suite
