// Settings under hostile input: a corpus of config files, environment values and options,
// generated here deterministically (fixed seed) into the build tree. Every case is refused
// within a second with one line of at most a few hundred characters naming the key or the file
// position - in process (Settings::resolve) and through the CLI (exit 2, nothing on stdout) -
// never a crash, a hang, or a configuration half applied.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "accelkit/settings.hpp"
#include "cli_process.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace settings_fuzz_suite {

using namespace accelkit;
using namespace accelkit::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kMaxLine = 320;  // "a few hundred characters"

// One hostile input and what the refusal must name.
struct Case {
  std::string name;
  std::string file_text;                     // a config file ("" = none)
  std::map<std::string, std::string> env;    // ACCELKIT_* variables
  std::vector<std::pair<std::string, std::string>> cli;  // settings from the command line
  std::string names;                         // a part of the message: the key, the variable or "file:line"
};

std::string repeat(const std::string& s, std::size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

// The corpus. Deterministic: the garbage comes from a fixed seed.
std::vector<Case> corpus() {
  std::mt19937_64 rng(0xacce1c17);
  std::string garbage(4096, '\0');
  for (auto& c : garbage) c = static_cast<char>(rng() & 0xff);
  std::string nested = "[a";
  for (int i = 1; i < 10000; ++i) nested += ".a";
  nested += "]\nb = 1\n";
  std::vector<Case> c = {
      {"binary garbage", garbage, {}, {}, "invalid TOML"},
      {"a 1 MB line: one unknown key", repeat("k", 1 << 20) + " = 1\n", {}, {}, "unknown setting 'kkkk"},
      {"a 1 MB value", "device = \"" + repeat("x", 1 << 20) + "\"\n", {}, {}, "'device'"},
      {"10,000 nested tables", nested, {}, {}, "unknown setting 'a'"},
      {"10,000 nested arrays", "prefer = " + repeat("[", 10000) + repeat("]", 10000) + "\n", {}, {}, "invalid TOML"},
      {"invalid UTF-8 in a value", "device = \"\xff\xfe\"\n", {}, {}, "invalid TOML"},
      {"invalid UTF-8 in a key", "dev\xc3\x28ice = \"cpu\"\n", {}, {}, "invalid TOML"},
      {"a duplicate key", "threads = 1\nthreads = 2\n", {}, {}, ":2:"},
      {"a wrong type", "threads = \"four\"\n", {}, {}, "'threads'"},
      {"an integer beyond 64 bits", "threads = 99999999999999999999\n", {}, {}, "64 bits"},
      {"NaN where an integer belongs", "threads = nan\n", {}, {}, "'threads'"},
      {"inf where a finite number belongs", "[train]\nlr = inf\n", {}, {}, "'train.lr'"},
      {"-inf", "[train]\nweight_decay = -inf\n", {}, {}, "'train.weight_decay'"},
      {"a negative thread count", "threads = -1\n", {}, {}, "'threads'"},
      {"an absurd thread count", "threads = 100000000\n", {}, {}, "'threads'"},
      {"device cuda:-1", "device = \"cuda:-1\"\n", {}, {}, "'device'"},
      {"device cuda:99999999999", "device = \"cuda:99999999999\"\n", {}, {}, "'device'"},
      {"an empty device", "device = \"\"\n", {}, {}, "'device'"},
      {"an empty plugin name", "prefer = [\"\"]\n", {}, {}, "'prefer'"},
      {"an empty precision", "precision = \"\"\n", {}, {}, "'precision'"},
      {"a table where a value belongs", "[device]\nx = 1\n", {}, {}, "'device'"},
      {"a value where a section belongs", "train = 5\n", {}, {}, "'train'"},
      {"an unknown [train] key", "[train]\nsteps = 1\nstpes = 2\n", {}, {}, "'stpes'"},
      {"a 100 kB ACCELKIT_DEVICE", "", {{"ACCELKIT_DEVICE", repeat("d", 100 * 1024)}}, {}, "ACCELKIT_DEVICE"},
      {"garbage in ACCELKIT_THREADS", "", {{"ACCELKIT_THREADS", "\x01\x02threads"}}, {}, "ACCELKIT_THREADS"},
      {"ACCELKIT_THREADS beyond 64 bits", "", {{"ACCELKIT_THREADS", "1" + repeat("0", 30)}}, {}, "ACCELKIT_THREADS"},
      {"ACCELKIT_THREADS negative", "", {{"ACCELKIT_THREADS", "-5"}}, {}, "ACCELKIT_THREADS"},
      {"invalid UTF-8 in ACCELKIT_PRECISION", "", {{"ACCELKIT_PRECISION", "bf\xff"}}, {}, "ACCELKIT_PRECISION"},
      {"a boolean that is not", "", {{"ACCELKIT_NO_GPU", repeat("maybe", 1000)}}, {}, "ACCELKIT_NO_GPU"},
      {"--threads beyond 64 bits", "", {}, {{"threads", "99999999999999999999"}}, "--threads"},
      {"--device cuda:-1", "", {}, {{"device", "cuda:-1"}}, "--device"},
      {"--device of 100 kB", "", {}, {{"device", repeat("c", 100 * 1024)}}, "--device"},
  };
  return c;
}

// Writes the corpus's files under the build tree; returns each case's config path ("" = none).
std::vector<std::string> write_corpus(const std::vector<Case>& cases) {
  const fs::path dir = fs::path(ACCELKIT_TEST_BINARY_DIR) / "settings-corpus";
  fs::create_directories(dir);
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].file_text.empty()) {
      paths.emplace_back();
      continue;
    }
    const fs::path p = dir / ("case-" + std::to_string(i) + ".toml");
    std::ofstream(p, std::ios::binary) << cases[i].file_text;
    paths.push_back(p.string());
  }
  return paths;
}

void check_line(const std::string& what, const std::string& names) {
  CHECK_MESSAGE(what.find('\n') == std::string::npos, what.substr(0, 400));
  CHECK(what.size() <= kMaxLine);
  CHECK_MESSAGE(contains(what, names), what.substr(0, 400));
}

}  // namespace

TEST_CASE("every hostile input is refused in process: fast, one short line, naming the key or position") {
  const auto cases = corpus();
  const auto paths = write_corpus(cases);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    CAPTURE(c.name);
    SettingsInputs in;
    if (!paths[i].empty()) in.config_path = paths[i];
    in.env = c.env;
    in.cli = c.cli;
    const auto t0 = Clock::now();
    std::string what;
    try {
      Settings::resolve(in);
      FAIL("accepted");
    } catch (const SettingsError& e) {
      what = e.what();
    }
    CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 1.0);
    check_line(what, c.names);
    if (!paths[i].empty() && c.names.rfind("invalid TOML", 0) == 0) CHECK(contains(what, paths[i] + ":"));
  }
}

TEST_CASE("every hostile input through the CLI: exit 2, one line on stderr, nothing on stdout") {
  const auto cases = corpus();
  const auto paths = write_corpus(cases);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    CAPTURE(c.name);
    std::vector<std::string> args;
    if (!paths[i].empty()) args = {"--config", paths[i]};
    for (const auto& [key, value] : c.cli) {
      std::string opt = "--" + key;
      for (auto& ch : opt)
        if (ch == '_') ch = '-';
      args.push_back(opt);
      args.push_back(value);
    }
    args.push_back("info");
    EnvOverrides env;
    for (const auto& [k, v] : c.env) env.emplace_back(k, v);
    const auto t0 = Clock::now();
    const RunResult r = run_cli(args, env);
    CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 5.0);  // the whole process
    CHECK_MESSAGE(r.code == 2, describe(r).substr(0, 600));
    CHECK(r.out.empty());
    std::string err = r.err;
    if (!err.empty() && err.back() == '\n') err.pop_back();
    check_line(err, c.names);
  }
}

}  // namespace settings_fuzz_suite
