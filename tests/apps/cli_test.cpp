// The accelkit CLI, run as a subprocess: JSON shape, exit codes, settings layers, negotiation
// with the real CPU plugin and the fake GPU plugins, report --apply and monitor.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "accelkit/loader.hpp"
#include "cli_process.hpp"
#include "fixture_paths.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace cli_suite {


namespace {

using namespace accelkit::test;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string kConfigs = ACCELKIT_CLI_FIXTURES;
std::string config(const std::string& name) { return kConfigs + "/" + name; }


json parse(const RunResult& r) {
  try {
    return json::parse(r.out);
  } catch (const std::exception& e) {
    FAIL("stdout is not JSON (" << e.what() << "): " << describe(r));
  }
  return {};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t b = 0;
  for (std::size_t e; (e = s.find(sep, b)) != std::string::npos; b = e + 1) out.push_back(s.substr(b, e - b));
  out.push_back(s.substr(b));
  return out;
}

const json* plugin_named(const json& plugins, const std::string& name) {
  for (const auto& p : plugins)
    if (p.value("name", "") == name) return &p;
  return nullptr;
}

// The fake plugins' directories: --plugin-path arguments (or a ':' list).
std::string fake(const std::string& name) { return accelkit::test::fixture_dir(name); }

}  // namespace

TEST_CASE("help and version exit 0") {
  auto help = run_cli({"--help"});
  CHECK_MESSAGE(help.code == 0, describe(help));
  for (const char* verb : {"info", "plugins", "report", "monitor"}) CHECK(contains(help.out, verb));
  auto verb_help = run_cli({"help", "monitor"});
  CHECK(verb_help.code == 0);
  CHECK(contains(verb_help.out, "--interval"));
  auto version = run_cli({"--version", "--json"});
  CHECK(version.code == 0);
  CHECK(parse(version)["accelkit_version"].is_string());
}

TEST_CASE("info --json: plugins[], selected cpu, settings with provenance") {
  auto r = run_cli({"info", "--json"});
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  const json j = parse(r);
  CHECK(j["accelkit_version"].is_string());
  CHECK(j["torch_version"].is_string());

  REQUIRE(j["plugins"].is_array());
  const json* cpu = plugin_named(j["plugins"], "cpu");
  REQUIRE_MESSAGE(cpu, describe(r));
  for (const char* key : {"name", "path", "status", "reason", "version", "devices", "score", "reasons", "warnings"})
    CHECK_MESSAGE(cpu->contains(key), key);
  CHECK((*cpu)["status"] == "usable");
  CHECK((*cpu)["path"].get<std::string>().front() == '/');
  REQUIRE((*cpu)["devices"].size() >= 1);
  const json& dev = (*cpu)["devices"][0];
  CHECK(dev["id"] == "cpu:0");
  CHECK(dev["kind"] == "cpu");
  CHECK(dev["name"].is_string());
  CHECK(dev["vendor"].is_string());
  CHECK(dev["memory_bytes"].is_number_unsigned());
  CHECK(dev["properties"].is_object());
  REQUIRE(dev["capabilities"].is_array());
  bool has_fp32 = false;
  for (const auto& c : dev["capabilities"]) has_fp32 |= c == "fp32";
  CHECK(has_fp32);

  const json& sel = j["selected"];
  REQUIRE(sel.is_object());
  CHECK(sel["plugin"] == "cpu");
  CHECK(sel["device"] == "cpu:0");
  REQUIRE(sel["reasons"].is_array());
  CHECK(sel["reasons"].size() >= 1);

  const json& dev_setting = j["settings"]["device"];
  CHECK(dev_setting["value"] == "auto");
  CHECK(dev_setting["origin"] == "default");
  CHECK(dev_setting.contains("source"));
  CHECK(dev_setting.contains("why"));
}

TEST_CASE("info: a readable table") {
  auto r = run_cli({"info"});
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  CHECK(contains(r.out, "Selected: cpu:0"));
  CHECK(contains(r.out, "NAME"));
  CHECK(contains(r.out, "usable"));
  CHECK(r.out.find('{') == std::string::npos);  // not a JSON dump
}

TEST_CASE("plugins -v: search path and trace") {
  auto r = run_cli({"plugins", "-v", "--json"});
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  const json j = parse(r);
  REQUIRE(j["search_dirs"].is_array());
  REQUIRE(j["search_dirs"].size() >= 1);
  CHECK(j["search_dirs"][0]["path"] == cpu_plugin_dir());
  CHECK(j["search_dirs"][0]["origin"] == "ACCELKIT_PLUGIN_PATH");
  REQUIRE(j["trace"].is_array());
  bool traced = false;
  for (const auto& line : j["trace"]) traced |= contains(line.get<std::string>(), "libaccelkit-cpu.so");
  CHECK_MESSAGE(traced, describe(r));
  CHECK(plugin_named(j["plugins"], "cpu"));

  auto text = run_cli({"plugins", "-v"});
  REQUIRE(text.code == 0);
  CHECK(contains(text.out, "Trace:"));
  CHECK(contains(text.out, cpu_plugin_dir()));

  auto plain = run_cli({"plugins", "--json"});
  REQUIRE(plain.code == 0);
  CHECK_FALSE(parse(plain).contains("trace"));
}

TEST_CASE("--plugin-path replaces ACCELKIT_PLUGIN_PATH") {
  TempDir empty("accelkit-cli-empty");
  auto r = run_cli({"plugins", "-v", "--json", "--plugin-path", cpu_plugin_dir()},
                   {{"ACCELKIT_PLUGIN_PATH", empty.str()}});
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  const json j = parse(r);
  CHECK(j["search_dirs"][0]["origin"] == "--plugin-path");
  CHECK(plugin_named(j["plugins"], "cpu"));
}

TEST_CASE("usage and config errors exit 2") {
  SUBCASE("unknown option") {
    auto r = run_cli({"info", "--frobnicate"});
    CHECK_MESSAGE(r.code == 2, describe(r));
    CHECK(contains(r.err, "--frobnicate"));
  }
  SUBCASE("unknown verb") {
    auto r = run_cli({"frobnicate"});
    CHECK_MESSAGE(r.code == 2, describe(r));
    CHECK(contains(r.err, "frobnicate"));
  }
  SUBCASE("no verb") { CHECK(run_cli({}).code == 2); }
  SUBCASE("verb option on the wrong verb") { CHECK(run_cli({"info", "--apply"}).code == 2); }
  SUBCASE("bad monitor count") { CHECK(run_cli({"monitor", "--count", "0"}).code == 2); }
  SUBCASE("bad log level") { CHECK(run_cli({"info", "--log-level", "loud"}).code == 2); }
  SUBCASE("TOML syntax error: file:line:column") {
    auto r = run_cli({"info", "--config", config("bad_syntax.toml")});
    CHECK_MESSAGE(r.code == 2, describe(r));
    CHECK_MESSAGE(contains(r.err, "bad_syntax.toml:3:"), describe(r));
    CHECK(r.out.empty());
  }
  SUBCASE("TOML syntax error through ACCELKIT_CONFIG") {
    auto r = run_cli({"info"}, {{"ACCELKIT_CONFIG", config("bad_syntax.toml")}});
    CHECK_MESSAGE(r.code == 2, describe(r));
    CHECK(contains(r.err, "bad_syntax.toml:3:"));
  }
  SUBCASE("unknown key names the nearest") {
    auto r = run_cli({"report", "--config", config("unknown_key.toml")});
    CHECK_MESSAGE(r.code == 2, describe(r));
    CHECK(contains(r.err, "devise"));
    CHECK(contains(r.err, "device"));
  }
  SUBCASE("wrong type names the key") {
    auto r = run_cli({"info", "--config", config("wrong_type.toml")});
    CHECK_MESSAGE(r.code == 2, describe(r));
    CHECK(contains(r.err, "threads"));
  }
}

TEST_CASE("an explicit request that cannot be honoured exits 3, listing what is available") {
  SUBCASE("--device cuda:1 without a cuda plugin") {
    auto r = run_cli({"info", "--device", "cuda:1"});
    CHECK_MESSAGE(r.code == 3, describe(r));
    CHECK(contains(r.err, "cuda:1"));
    CHECK_MESSAGE(contains(r.err, "cpu"), describe(r));
  }
  SUBCASE("--json keeps the error in the decision") {
    auto r = run_cli({"info", "--json", "--device", "cuda:1"});
    CHECK(r.code == 3);
    const json j = parse(r);
    CHECK(j["selected"].is_null());
    CHECK(j["decision"]["explicit_request"] == true);
    CHECK(contains(j["decision"]["error"].get<std::string>(), "cpu"));
  }
  SUBCASE("ACCELKIT_DEVICE") {
    auto r = run_cli({"report"}, {{"ACCELKIT_DEVICE", "rocm"}});
    CHECK_MESSAGE(r.code == 3, describe(r));
  }
  SUBCASE("config device") {
    auto r = run_cli({"monitor", "--count", "1", "--config", config("device_cuda.toml")});
    CHECK_MESSAGE(r.code == 3, describe(r));
    CHECK(contains(r.err, "cuda"));
  }
  SUBCASE("cuda:5 with a two-device cuda plugin") {
    auto r = run_cli({"info", "--device", "cuda:5", "--plugin-path", cpu_plugin_dir(), "--plugin-path", fake("cuda")});
    CHECK_MESSAGE(r.code == 3, describe(r));
  }
}

TEST_CASE("the command line wins over the environment") {
  auto r = run_cli({"info", "--json", "--device", "cpu"}, {{"ACCELKIT_DEVICE", "cuda:1"}});
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  const json j = parse(r);
  CHECK(j["selected"]["device"] == "cpu:0");
  CHECK(j["settings"]["device"]["origin"] == "cli");

  auto env = run_cli({"info", "--json"}, {{"ACCELKIT_PRECISION", "fp32"}});
  REQUIRE(env.code == 0);
  CHECK(parse(env)["settings"]["precision"]["origin"] == "env");
}

TEST_CASE("auto with nothing usable exits 1 with a clear message") {
  TempDir empty("accelkit-cli-empty");
  auto r = run_cli({"info"}, {{"ACCELKIT_PLUGIN_PATH", empty.str()}});
  CHECK_MESSAGE(r.code == 1, describe(r));
  CHECK(contains(r.err, "no usable device"));
}

TEST_CASE("negotiation through the CLI with the fake GPU plugins") {
  const std::string path = cpu_plugin_dir() + ":" + fake("cuda") + ":" + fake("rocm");
  const EnvOverrides env{{"ACCELKIT_PLUGIN_PATH", path}};

  SUBCASE("auto picks cuda") {
    auto r = run_cli({"info", "--json"}, env);
    REQUIRE_MESSAGE(r.code == 0, describe(r));
    CHECK(parse(r)["selected"]["plugin"] == "cuda");
  }
  SUBCASE("--device cuda:1 is honoured") {
    auto r = run_cli({"info", "--json", "--device", "cuda:1"}, env);
    REQUIRE_MESSAGE(r.code == 0, describe(r));
    const json j = parse(r);
    CHECK(j["selected"]["device"] == "cuda:1");
    CHECK(j["selected"]["plugin"] == "cuda");
  }
  SUBCASE("--no-gpu picks cpu") {
    auto r = run_cli({"info", "--json", "--no-gpu"}, env);
    REQUIRE_MESSAGE(r.code == 0, describe(r));
    const json j = parse(r);
    CHECK(j["selected"]["plugin"] == "cpu");
    CHECK(j["settings"]["no_gpu"]["origin"] == "cli");
  }
  SUBCASE("prefer in a config reorders") {
    auto r = run_cli({"info", "--json", "--config", config("prefer_rocm.toml")}, env);
    REQUIRE_MESSAGE(r.code == 0, describe(r));
    const json j = parse(r);
    CHECK(j["selected"]["plugin"] == "rocm");
    CHECK(j["settings"]["prefer"]["origin"] == "file");
    CHECK(contains(j["settings"]["prefer"]["source"].get<std::string>(), "prefer_rocm.toml"));
  }
  SUBCASE("plugins lists every one loaded") {
    auto r = run_cli({"plugins", "--json"}, env);
    REQUIRE(r.code == 0);
    const json j = parse(r);
    for (const char* name : {"cpu", "cuda", "rocm"}) {
      const json* p = plugin_named(j["plugins"], name);
      REQUIRE_MESSAGE(p, name);
      CHECK((*p)["status"] == "usable");
    }
    CHECK((*plugin_named(j["plugins"], "cuda"))["devices"].size() == 2);
  }
}

TEST_CASE("plugins reports refused plugins with a reason") {
  const std::string path = cpu_plugin_dir() + ":" + fake("abi-new") + ":" + fake("garbage");
  auto r = run_cli({"plugins", "--json"}, {{"ACCELKIT_PLUGIN_PATH", path}});
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  const json j = parse(r);
  for (const auto& p : j["plugins"]) {
    if (p["name"] == "cpu") continue;
    CHECK(p["status"] == "rejected");
    CHECK_FALSE(p["reason"].get<std::string>().empty());
  }
  CHECK(j["plugins"].size() == 3);
}

TEST_CASE("report --apply reads the values back from LibTorch") {
  SUBCASE("defaults") {
    auto r = run_cli({"report", "--apply", "--json"});
    REQUIRE_MESSAGE(r.code == 0, describe(r));
    const json j = parse(r);
    const json& plan = j["precision"]["plan"];
    REQUIRE(plan["threads"].is_number_integer());
    CHECK(j["applied"]["mismatches"] == 0);
    bool saw_threads = false;
    for (const auto& v : j["applied"]["values"]) {
      if (v["key"] != "num_threads") continue;
      saw_threads = true;
      CHECK(v["value"] == std::to_string(plan["threads"].get<int>()));
      CHECK(v["match"] == true);
    }
    CHECK_MESSAGE(saw_threads, describe(r));
    // The CPU plugin's memory figures: this process's resident set and the machine's memory.
    const json& mem = j["memory"];
    REQUIRE_MESSAGE(mem["in_use"].is_number_integer(), describe(r));
    CHECK(mem["in_use"].get<std::uint64_t>() > 0);
    CHECK(mem["peak"].get<std::uint64_t>() >= mem["in_use"].get<std::uint64_t>());
    CHECK(mem["available"].get<std::uint64_t>() <= mem["total"].get<std::uint64_t>());
    CHECK(mem["source"].get<std::string>().find("/proc/self/status") != std::string::npos);
    CHECK(j["data_pipeline"]["prefetch"] == 2);
    CHECK(j["data_pipeline"]["from"] == "built-in");
  }
  SUBCASE("threads from a config") {
    auto r = run_cli({"report", "--apply", "--json", "--config", config("threads_one.toml")});
    REQUIRE_MESSAGE(r.code == 0, describe(r));
    const json j = parse(r);
    CHECK(j["precision"]["request"]["threads"] == 1);
    CHECK(j["precision"]["plan"]["threads"] == 1);
    CHECK(j["precision"]["plan"]["dtype"] == "fp32");
    CHECK(j["settings"]["threads"]["origin"] == "file");
    bool saw = false;
    for (const auto& v : j["applied"]["values"])
      if (v["key"] == "num_threads") saw = v["value"] == "1";
    CHECK_MESSAGE(saw, describe(r));
  }
  SUBCASE("human output prints intended beside read back") {
    auto r = run_cli({"report", "--apply"});
    REQUIRE_MESSAGE(r.code == 0, describe(r));
    CHECK(contains(r.out, "READ BACK"));
    CHECK(contains(r.out, "num_threads"));
    CHECK_FALSE(contains(r.out, "MISMATCH"));
  }
  SUBCASE("without --apply nothing is read back") {
    auto r = run_cli({"report", "--json"});
    REQUIRE(r.code == 0);
    const json j = parse(r);
    CHECK(j["precision"]["plan"].is_object());
    CHECK_FALSE(j.contains("applied"));
  }
}

TEST_CASE("monitor --count 2 --interval 0.1") {
  SUBCASE("--csv: header + 2 rows") {
    auto r = run_cli({"monitor", "--count", "2", "--interval", "0.1", "--csv"});
    REQUIRE_MESSAGE(r.code == 0, describe(r));
    const auto lines = lines_of(r.out);
    REQUIRE_MESSAGE(lines.size() == 3, describe(r));
    const auto header = split(lines[0], ',');
    CHECK(header[0] == "time_s");
    CHECK(header.size() >= 2);
    for (std::size_t i = 1; i < 3; ++i) CHECK(split(lines[i], ',').size() == header.size());
  }
  SUBCASE("--json: one object per line, n/a with its note") {
    auto r = run_cli({"monitor", "--count", "2", "--interval", "0.1", "--json"});
    REQUIRE_MESSAGE(r.code == 0, describe(r));
    const auto lines = lines_of(r.out);
    REQUIRE(lines.size() == 2);
    for (const auto& line : lines) {
      const json j = json::parse(line);
      CHECK(j["device"] == "cpu:0");
      REQUIRE(j["readings"].is_object());
      for (const auto& [key, reading] : j["readings"].items()) {
        CHECK_MESSAGE(reading.contains("value"), key);
        if (reading["value"].is_null()) CHECK_FALSE_MESSAGE(reading["note"].get<std::string>().empty(), key);
      }
    }
  }
  SUBCASE("table") {
    auto r = run_cli({"monitor", "--count", "2", "--interval", "0.1"});
    REQUIRE_MESSAGE(r.code == 0, describe(r));
    CHECK(contains(r.out, "time_s"));
  }
}

TEST_CASE("monitor stops cleanly on SIGINT") {
  CliProcess p({"monitor", "--interval", "0.1"}, {});
  // Wait for the header and two rows (start-up loads LibTorch: allow for a slow machine).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (lines_of(p.out()).size() < 6 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(::kill(p.pid(), SIGINT) == 0);
  const RunResult r = p.wait();
  CHECK_MESSAGE(r.code == 0, describe(r));
  CHECK(contains(r.out, "time_s"));
  CHECK(contains(r.err, "stopped after"));
}

// --trace FILE: the trace file as JSON (Kineto's {"traceEvents": [...]} or the legacy profiler's
// bare array), by event name.
std::multiset<std::string> trace_event_names(const fs::path& file) {
  std::ifstream in(file);
  REQUIRE_MESSAGE(in, "no trace file " << file);
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    FAIL("the trace file is not JSON: " << e.what());
  }
  std::multiset<std::string> names;
  for (const auto& e : j.is_array() ? j : j.at("traceEvents"))
    if (e.contains("name") && e["name"].is_string()) names.insert(e["name"].get<std::string>());
  return names;
}

TEST_CASE("bench --trace: a Chrome trace of accelkit's steps after the timed ones, the top operations") {
  TempDir tmp("accelkit-cli-trace");
  const fs::path file = tmp.path() / "bench.json";
  const RunResult r = run_cli({"bench", "--model", "mlp", "--width", "32", "--batch", "8", "--steps", "2", "--warmup",
                               "1", "--trace", file.string(), "--json"});
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  const auto names = trace_event_names(file);
  CHECK(names.count("accelkit step") == 5);
  CHECK((names.count("aten::addmm") + names.count("aten::mm")) > 0);
  CHECK(contains(r.err, "trace: " + file.string() + " ("));
  CHECK(contains(r.err, "5 accelkit steps after the timed ones); open in https://ui.perfetto.dev or chrome://tracing"));
  CHECK(contains(r.err, "top operations by self time"));
  CHECK(contains(r.err, "top operations by memory"));
  const json j = parse(r);
  const json& t = j.at("trace");
  CHECK(t["path"] == file.string());
  CHECK(t["events"].get<long long>() > 0);
  REQUIRE_FALSE(t["top_by_self_time"].empty());
  CHECK(t["top_by_self_time"].size() <= 10);
  for (const auto& row : t["top_by_self_time"]) CHECK(row["self_us"].get<double>() <= row["total_us"].get<double>());
  CHECK_FALSE(t["top_by_memory"].empty());
}

TEST_CASE("train --trace: steps 2-6 traced, each a 'train step' range") {
  TempDir tmp("accelkit-cli-trace");
  const fs::path cfg = tmp.path() / "train.toml";
  write_file(cfg, "device = \"cpu\"\nthreads = 1\n\n[train]\nsteps = 8\nbatch_size = 16\nwidth = 32\ndepth = 2\n"
                  "outputs = 4\nlog_every = 4\ncheckpoint_dir = \"" + (tmp.path() / "ckpt").string() + "\"\n");
  const fs::path file = tmp.path() / "train.json";
  const RunResult r = run_cli({"train", "--config", cfg.string(), "--trace", file.string(), "--json"});
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  const auto names = trace_event_names(file);
  CHECK(names.count("train step") == 5);
  CHECK((names.count("aten::addmm") + names.count("aten::mm")) > 0);
  CHECK(contains(r.err, "trace: " + file.string() + " ("));
  CHECK(contains(r.err, "steps 2-6); open in https://ui.perfetto.dev or chrome://tracing"));
  std::optional<json> event;
  for (const auto& line : lines_of(r.out)) {
    const json j = json::parse(line);
    if (j.value("event", "") == "trace") event = j;
  }
  REQUIRE_MESSAGE(event, describe(r));
  const json& t = (*event)["trace"];
  CHECK(t["steps"] == "steps 2-6");
  CHECK(t["path"] == file.string());
  REQUIRE_FALSE(t["top_by_self_time"].empty());
  bool step_row = false;
  for (const auto& row : t["top_by_self_time"])
    step_row = step_row || (row["name"] == "train step" && row["calls"] == 5);
  CHECK(step_row);
}

TEST_CASE("--trace to a path that cannot be written is refused before the run, exit 2") {
  TempDir tmp("accelkit-cli-trace");
  const fs::path cfg = tmp.path() / "train.toml";
  const fs::path ckpt = tmp.path() / "ckpt";
  write_file(cfg, "device = \"cpu\"\n\n[train]\nsteps = 3\nwidth = 8\ncheckpoint_dir = \"" + ckpt.string() + "\"\n");
  const std::string missing = (tmp.path() / "no-such-dir" / "t.json").string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"bench", "--model", "mlp", "--width", "32", "--batch", "8", "--steps", "2", "--trace", missing},
           {"train", "--config", cfg.string(), "--trace", missing},
           {"train", "--config", cfg.string(), "--trace", tmp.str()}}) {
    CAPTURE(args.back());
    const RunResult r = run_cli(args);
    CHECK_MESSAGE(r.code == 2, describe(r));
    CHECK(contains(r.err, "trace: cannot write"));
    CHECK_FALSE(contains(r.err, "accelkit train: cpu"));  // nothing ran
    CHECK_FALSE(contains(r.err, "bench mlp:"));
  }
  CHECK_FALSE(fs::exists(ckpt));
  const RunResult other = run_cli({"info", "--trace", (tmp.path() / "t.json").string()});
  CHECK(other.code == 2);
  CHECK(contains(other.err, "--trace is an option of 'bench' and 'train'"));
}

}  // namespace cli_suite
