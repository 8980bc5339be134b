// Settings: layering, provenance, profiles and every way a bad input is refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "accelkit/routing.hpp"
#include "accelkit/settings.hpp"
#include "accelkit/train_config.hpp"
#include "config_file.hpp"
#include "test_support.hpp"

using namespace accelkit;
namespace fs = std::filesystem;

namespace {

using Cli = std::vector<std::pair<std::string, std::string>>;
using Env = std::map<std::string, std::string>;

std::string fixture(const std::string& name) {
  return (fs::path(ACCELKIT_TEST_FIXTURES) / "config" / name).lexically_normal().string();
}

SettingsInputs inputs(std::optional<std::string> config = std::nullopt, Cli cli = {}, Env env = {}) {
  SettingsInputs in;
  in.config_path = std::move(config);
  in.cli = std::move(cli);
  in.env = std::move(env);  // never the process environment unless a test says so
  return in;
}

// The message of the SettingsError that resolve() throws; fails the test when it does not throw.
std::string refusal(const SettingsInputs& in) {
  try {
    Settings::resolve(in);
  } catch (const SettingsError& e) {
    return e.what();
  }
  FAIL("resolve() accepted a bad input");
  return {};
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("schema: display order, types and env names") {
  const auto& schema = settings_schema();
  std::vector<std::string> keys;
  for (const auto& spec : schema) keys.push_back(spec.key);
  CHECK(keys == std::vector<std::string>{"device", "no_gpu", "precision", "tf32", "compile", "sdpa_backend",
                                         "fused_optimizer", "adamw_implementation", "master_weights", "threads", "blas_kernels", "batch_size", "profile", "sampler",
                                         "autotune", "autotune_cache", "log_level", "prefer", "require"});
  for (const auto& spec : schema) {
    CHECK_MESSAGE(spec.default_value.index() == static_cast<size_t>(spec.type), spec.key);
    CHECK_MESSAGE(!spec.help.empty(), spec.key);
  }
  CHECK(schema[0].env == "ACCELKIT_DEVICE");
  CHECK(schema[2].env == "ACCELKIT_PRECISION");
  CHECK(schema[4].env == "ACCELKIT_COMPILE");
  CHECK(schema[7].env == "ACCELKIT_ADAMW_IMPLEMENTATION");
  CHECK(schema[8].env == "ACCELKIT_MASTER_WEIGHTS");
  CHECK(schema[10].env == "ACCELKIT_BLAS_KERNELS");
  CHECK(schema[12].env == "ACCELKIT_PROFILE");
  CHECK(schema[16].env == "ACCELKIT_LOG_LEVEL");
  CHECK(std::string(to_string(SettingType::string_list)) == "array of strings");
  CHECK(std::string(to_string(Origin::default_value)) == "default");
  CHECK(std::string(to_string(Origin::benchmark)) == "benchmark");
}

TEST_CASE("defaults: every key built-in") {
  Settings s;
  CHECK(s.str("device") == "auto");
  CHECK(s.flag("no_gpu") == false);
  CHECK(s.str("precision") == "auto");
  CHECK(s.str("tf32") == "auto");
  CHECK(s.str("compile") == "auto");
  CHECK(s.str("sdpa_backend") == "auto");
  CHECK(s.str("fused_optimizer") == "auto");
  CHECK(s.integer("threads") == 0);
  CHECK(s.integer("batch_size") == 0);
  CHECK(s.str("profile") == "balanced");
  CHECK(s.flag("sampler") == true);
  CHECK(s.flag("autotune") == false);
  CHECK(s.str("log_level") == "warn");
  CHECK(s.list("prefer").empty());
  CHECK(s.list("require").empty());
  auto all = s.all();
  REQUIRE(all.size() == settings_schema().size());
  for (const auto& [key, eff] : all) {
    CHECK_MESSAGE(eff.origin == Origin::default_value, key);
    CHECK_MESSAGE(eff.source == "built-in", key);
    CHECK_MESSAGE(!eff.why.empty(), key);
  }
  CHECK_FALSE(s.config_file());
  CHECK_THROWS_AS(s.get("devcie"), std::out_of_range);
  CHECK_THROWS_AS(s.integer("device"), std::logic_error);

  // resolve() with nothing given is the same.
  auto r = Settings::resolve(inputs());
  CHECK(r.get("device").origin == Origin::default_value);
  CHECK(r.str("profile") == "balanced");
}

TEST_CASE("format_value") {
  CHECK(format_value(true) == "true");
  CHECK(format_value(std::int64_t{4}) == "4");
  CHECK(format_value(std::string("cpu")) == "cpu");
  CHECK(format_value(std::vector<std::string>{"a", "b"}) == "[a, b]");
  CHECK(format_value(std::vector<std::string>{}) == "[]");
}

TEST_CASE("file layer: every key, with file:line:column") {
  auto path = fixture("full.toml");
  auto s = Settings::resolve(inputs(path));
  REQUIRE(s.config_file());
  CHECK(*s.config_file() == path);
  CHECK(s.str("device") == "cpu");
  CHECK(s.flag("no_gpu"));
  CHECK(s.str("precision") == "bf16");
  CHECK(s.str("tf32") == "off");
  CHECK(s.str("compile") == "off");
  CHECK(s.str("sdpa_backend") == "math");
  CHECK(s.str("fused_optimizer") == "off");
  CHECK(s.integer("threads") == 4);
  CHECK(s.integer("batch_size") == 32);
  CHECK(s.flag("sampler") == false);
  CHECK(s.flag("autotune"));
  CHECK(s.str("log_level") == "info");
  CHECK(s.list("prefer") == std::vector<std::string>{"cpu", "cuda"});
  CHECK(s.list("require") == std::vector<std::string>{"fp32", "memory_stats"});
  CHECK(s.flag("autotune_cache") == false);
  CHECK(s.str("master_weights") == "on");
  CHECK(s.str("blas_kernels") == "library");
  CHECK(s.str("adamw_implementation") == "aten-fused");
  for (const auto& [key, eff] : s.all()) {
    CHECK_MESSAGE(eff.origin == Origin::file, key);
    CHECK_MESSAGE(contains(eff.source, path + ":"), key);
  }
  CHECK(s.get("device").source == path + ":2:1");
  CHECK(s.get("threads").source == path + ":9:3");  // indented key
  CHECK(s.get("require").source == path + ":16:1");
}

TEST_CASE("config path: ACCELKIT_CONFIG when --config is absent; relative paths made absolute") {
  auto path = fixture("threads.toml");
  auto s = Settings::resolve(inputs(std::nullopt, {}, {{"ACCELKIT_CONFIG", path}}));
  REQUIRE(s.config_file());
  CHECK(*s.config_file() == path);
  CHECK(s.integer("threads") == 3);

  // --config wins over ACCELKIT_CONFIG.
  auto t = Settings::resolve(inputs(fixture("full.toml"), {}, {{"ACCELKIT_CONFIG", path}}));
  CHECK(t.integer("threads") == 4);

  auto relative = fs::relative(path).string();
  REQUIRE(fs::path(relative).is_relative());
  auto u = Settings::resolve(inputs(relative));
  REQUIRE(u.config_file());
  CHECK(*u.config_file() == path);
  CHECK(u.get("threads").source == path + ":1:1");

  // An empty ACCELKIT_CONFIG counts as unset.
  CHECK_FALSE(Settings::resolve(inputs(std::nullopt, {}, {{"ACCELKIT_CONFIG", ""}})).config_file());
}

TEST_CASE("layers: default < file < env < cli, each with its origin and source") {
  auto path = fixture("threads.toml");
  SUBCASE("file over default") {
    auto s = Settings::resolve(inputs(path));
    CHECK(s.integer("threads") == 3);
    CHECK(s.get("threads").origin == Origin::file);
    CHECK(s.get("batch_size").origin == Origin::default_value);
  }
  SUBCASE("env over file") {
    auto s = Settings::resolve(inputs(path, {}, {{"ACCELKIT_THREADS", "5"}, {"ACCELKIT_DEVICE", "cuda:1"}}));
    CHECK(s.integer("threads") == 5);
    CHECK(s.get("threads").origin == Origin::env);
    CHECK(s.get("threads").source == "ACCELKIT_THREADS");
    CHECK(s.str("device") == "cuda:1");
    CHECK(s.get("device").source == "ACCELKIT_DEVICE");
  }
  SUBCASE("cli over env over file") {
    auto s = Settings::resolve(inputs(path, {{"threads", "7"}, {"no_gpu", "true"}},
                                      {{"ACCELKIT_THREADS", "5"}, {"ACCELKIT_NO_GPU", "0"}}));
    CHECK(s.integer("threads") == 7);
    CHECK(s.get("threads").origin == Origin::cli);
    CHECK(s.get("threads").source == "--threads");
    CHECK(s.flag("no_gpu"));
    CHECK(s.get("no_gpu").source == "--no-gpu");
    CHECK(s.str("device") == "cpu");  // only the file set it
    CHECK(s.get("device").origin == Origin::file);
  }
  SUBCASE("env and cli text forms") {
    auto s = Settings::resolve(inputs(std::nullopt, {{"prefer", "cuda"}, {"prefer", "rocm, cpu"}, {"log-level", "debug"}},
                                      {{"ACCELKIT_REQUIRE", " bf16 ,fused_adamw,"}, {"ACCELKIT_SAMPLER", "OFF"},
                                       {"ACCELKIT_PRECISION", ""}}));
    CHECK(s.list("prefer") == std::vector<std::string>{"cuda", "rocm", "cpu"});  // repeated options accumulate
    CHECK(s.list("require") == std::vector<std::string>{"bf16", "fused_adamw"});
    CHECK(s.get("require").source == "ACCELKIT_REQUIRE");
    CHECK(s.flag("sampler") == false);
    CHECK(s.str("log_level") == "debug");
    CHECK(s.get("log_level").source == "--log-level");
    CHECK(s.get("precision").origin == Origin::default_value);  // empty variable = unset
  }
}

TEST_CASE("the process environment is read when inputs.env is unset") {
  ::setenv("ACCELKIT_BATCH_SIZE", "64", 1);
  SettingsInputs in;
  auto s = Settings::resolve(in);
  ::unsetenv("ACCELKIT_BATCH_SIZE");
  CHECK(s.integer("batch_size") == 64);
  CHECK(s.get("batch_size").origin == Origin::env);
  CHECK(s.get("batch_size").source == "ACCELKIT_BATCH_SIZE");
}

TEST_CASE("profiles: chosen from the highest layer, applied as the profile layer") {
  SUBCASE("maximum_performance from the file; the file's own tf32 wins") {
    auto s = Settings::resolve(inputs(fixture("max_perf.toml")));
    CHECK(s.str("profile") == "maximum_performance");
    CHECK(s.get("profile").origin == Origin::file);
    CHECK(s.str("compile") == "graph");
    CHECK(s.get("compile").origin == Origin::profile);
    CHECK(s.get("compile").source == "profile maximum_performance");
    CHECK(s.get("compile").why == "maximum_performance turns on graph capture");
    CHECK(s.str("fused_optimizer") == "on");
    CHECK(s.get("fused_optimizer").origin == Origin::profile);
    CHECK(s.str("master_weights") == "on");
    CHECK(s.get("master_weights").origin == Origin::profile);
    CHECK(s.str("tf32") == "off");
    CHECK(s.get("tf32").origin == Origin::file);
    CHECK(s.get("sampler").origin == Origin::default_value);
  }
  SUBCASE("env profile beats the file's; the file still overrides the profile's values") {
    auto s = Settings::resolve(inputs(fixture("max_perf.toml"), {}, {{"ACCELKIT_PROFILE", "ultra_low_overhead"}}));
    CHECK(s.str("profile") == "ultra_low_overhead");
    CHECK(s.get("profile").source == "ACCELKIT_PROFILE");
    CHECK(s.str("compile") == "off");
    CHECK(s.get("compile").source == "profile ultra_low_overhead");
    CHECK(s.flag("sampler") == false);
    CHECK(s.get("sampler").why == "ultra_low_overhead turns off the sampler thread");
    CHECK(s.flag("autotune") == false);
    CHECK(s.get("autotune").origin == Origin::profile);
    CHECK(s.get("fused_optimizer").origin == Origin::default_value);  // not maximum_performance
    CHECK(s.str("master_weights") == "off");
    CHECK(s.str("tf32") == "off");
    CHECK(s.get("tf32").origin == Origin::file);
  }
  SUBCASE("cli profile beats env and file; env and cli override the profile's values") {
    auto s = Settings::resolve(inputs(fixture("max_perf.toml"), {{"profile", "auto"}, {"autotune", "false"}},
                                      {{"ACCELKIT_PROFILE", "ultra_low_overhead"}, {"ACCELKIT_COMPILE", "graph"}}));
    CHECK(s.str("profile") == "auto");
    CHECK(s.get("profile").source == "--profile");
    CHECK(s.flag("autotune") == false);  // auto would turn it on; --autotune false wins
    CHECK(s.get("autotune").origin == Origin::cli);
    CHECK(s.str("compile") == "graph");
    CHECK(s.get("compile").origin == Origin::env);
  }
  SUBCASE("auto turns on autotune") {
    auto s = Settings::resolve(inputs(std::nullopt, {{"profile", "auto"}}));
    CHECK(s.flag("autotune"));
    CHECK(s.get("autotune").origin == Origin::profile);
    CHECK(s.get("autotune").source == "profile auto");
  }
  SUBCASE("balanced changes nothing") {
    auto s = Settings::resolve(inputs(std::nullopt, {}, {{"ACCELKIT_PROFILE", "balanced"}}));
    for (const auto& [key, eff] : s.all())
      if (key != "profile") CHECK_MESSAGE(eff.origin == Origin::default_value, key);
  }
}

TEST_CASE("bad file: TOML syntax error names file:line:column") {
  auto path = fixture("syntax_error.toml");
  auto msg = refusal(inputs(path));
  CHECK(contains(msg, path + ":2:"));
  CHECK(contains(msg, "invalid TOML"));
}

TEST_CASE("bad file: unknown key with the nearest valid key") {
  auto path = fixture("unknown_key.toml");
  CHECK(refusal(inputs(path)) == "unknown setting 'devcie' in " + path + ":2:1; did you mean 'device'?");

  auto far = refusal(inputs(fixture("unknown_far.toml")));
  CHECK(contains(far, "unknown setting 'frobnicate' in " + fixture("unknown_far.toml") + ":1:1"));
  CHECK_FALSE(contains(far, "did you mean"));

  auto table = refusal(inputs(fixture("table.toml")));
  CHECK(contains(table, "unknown setting 'colour' in " + fixture("table.toml") + ":3:"));
  CHECK(contains(table, "is a table"));
}

TEST_CASE("bad file: wrong type names the key and the expected type") {
  auto path = fixture("wrong_type.toml");
  CHECK(refusal(inputs(path)) == "'threads' in " + path + ":4:1 must be an integer, got string");
  CHECK(contains(refusal(inputs(fixture("bad_list.toml"))),
                 "'prefer' in " + fixture("bad_list.toml") + ":1:1 must be an array of strings, got array with integer at index 1"));
}

TEST_CASE("bad file: enum, device shape, bounds") {
  CHECK(refusal(inputs(fixture("bad_enum.toml"))) ==
        "'precision' in " + fixture("bad_enum.toml") + ":1:1 must be one of auto, fp32, bf16, fp16, got 'fp64'");  // fp32 and fp16 tie: no guess
  CHECK(contains(refusal(inputs(fixture("bad_device.toml"))), "must be auto, <plugin> or <plugin>:<index>"));
  CHECK(contains(refusal(inputs(fixture("out_of_range.toml"))), "'threads' in " + fixture("out_of_range.toml") + ":1:1 must be between 0 and"));
}

TEST_CASE("bad file: every problem is reported, none applied") {
  auto msg = refusal(inputs(fixture("many_errors.toml")));
  CHECK(contains(msg, "unknown setting 'devcie'"));
  CHECK(contains(msg, "'threads' in " + fixture("many_errors.toml") + ":2:1 must be an integer, got string"));
  CHECK(contains(msg, "'no_gpu' in " + fixture("many_errors.toml") + ":3:1 must be a boolean, got string"));
  // Top to bottom, one per line.
  CHECK(msg.find("devcie") < msg.find("'threads'"));
  CHECK(msg.find("'threads'") < msg.find("'no_gpu'"));
  CHECK(std::count(msg.begin(), msg.end(), '\n') == 2);
}

TEST_CASE("bad config path: missing, a directory, empty") {
  auto missing = fixture("no_such_file.toml");
  auto msg = refusal(inputs(missing));
  CHECK(contains(msg, "cannot read config file " + missing + " (from --config)"));
  CHECK(contains(msg, "No such file or directory"));

  auto via_env = refusal(inputs(std::nullopt, {}, {{"ACCELKIT_CONFIG", missing}}));
  CHECK(contains(via_env, "(from ACCELKIT_CONFIG)"));

  CHECK(contains(refusal(inputs(fixture(""))), "is a directory"));
  CHECK(contains(refusal(inputs(std::string())), "--config must name a file"));
}

TEST_CASE("bad environment value names the variable") {
  CHECK(refusal(inputs(std::nullopt, {}, {{"ACCELKIT_PRECISION", "bf61"}})) ==
        "ACCELKIT_PRECISION must be one of auto, fp32, bf16, fp16, got 'bf61'; did you mean 'bf16'?");
  CHECK(refusal(inputs(std::nullopt, {}, {{"ACCELKIT_THREADS", "four"}})) ==
        "ACCELKIT_THREADS must be an integer, got 'four'");
  CHECK(contains(refusal(inputs(std::nullopt, {}, {{"ACCELKIT_NO_GPU", "maybe"}})), "ACCELKIT_NO_GPU must be a boolean"));
  CHECK(contains(refusal(inputs(std::nullopt, {}, {{"ACCELKIT_DEVICE", "cuda:"}})), "ACCELKIT_DEVICE must be auto, <plugin>"));
  CHECK(contains(refusal(inputs(std::nullopt, {}, {{"ACCELKIT_PREFER", "cuda,Ro cm"}})), "ACCELKIT_PREFER must list plugin names"));
  // A good file is not applied when the environment is bad.
  CHECK(contains(refusal(inputs(fixture("threads.toml"), {}, {{"ACCELKIT_PROFILE", "fast"}})), "ACCELKIT_PROFILE must be one of"));
}

TEST_CASE("bad command-line value names the option") {
  CHECK(refusal(inputs(std::nullopt, {{"threads", "-2"}})) == "--threads must be between 0 and 65536, got -2");
  CHECK(refusal(inputs(std::nullopt, {{"threads", "2x"}})) == "--threads must be an integer, got '2x'");
  CHECK(contains(refusal(inputs(std::nullopt, {{"log_level", "verbose"}})), "--log-level must be one of trace, debug, info, warn, error, off"));
  CHECK(contains(refusal(inputs(std::nullopt, {{"device", "cuda:1:2"}})), "--device must be auto"));
  CHECK(refusal(inputs(std::nullopt, {{"thread", "2"}})) == "unknown option '--thread'; did you mean '--threads'?");
}

TEST_CASE("nearest_setting_key") {
  CHECK(nearest_setting_key("devcie") == "device");
  CHECK(nearest_setting_key("precison") == "precision");
  CHECK(nearest_setting_key("no-gpu") == "no_gpu");
  CHECK(nearest_setting_key("Threads") == "threads");
  CHECK(nearest_setting_key("sdpa") == "sdpa_backend");
  CHECK(nearest_setting_key("frobnicate") == "");
  CHECK(nearest_setting_key("x") == "");
  CHECK(nearest_setting_key("") == "");
}

TEST_CASE("set(): later layers, validated; a bad value leaves the old one intact") {
  auto s = Settings::resolve(inputs(fixture("threads.toml")));
  s.set("precision", std::string("bf16"), Origin::probe, "cpu plugin", "AVX512_BF16 present");
  CHECK(s.str("precision") == "bf16");
  CHECK(s.get("precision").origin == Origin::probe);
  CHECK(s.get("precision").source == "cpu plugin");
  CHECK(s.get("precision").why == "AVX512_BF16 present");

  s.set("batch_size", std::int64_t{128}, Origin::benchmark, "bench");
  CHECK(s.integer("batch_size") == 128);

  auto refuse = [&](std::string_view key, SettingValue v) -> std::string {
    try {
      s.set(key, std::move(v), Origin::probe, "cpu plugin");
    } catch (const SettingsError& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(refuse("threads", std::string("four")) == "'threads' from probe (cpu plugin) must be an integer, got string");
  CHECK(contains(refuse("threads", std::int64_t{-1}), "must be between 0 and"));
  CHECK(contains(refuse("precision", std::string("fp64")), "must be one of auto, fp32, bf16, fp16"));
  CHECK(contains(refuse("device", std::string("CPU")), "must be auto, <plugin>"));
  CHECK(refuse("devcie", std::string("cpu")) == "unknown setting 'devcie'; did you mean 'device'?");
  // Nothing changed.
  CHECK(s.integer("threads") == 3);
  CHECK(s.get("threads").origin == Origin::file);
  CHECK(s.str("precision") == "bf16");
  CHECK(s.get("precision").origin == Origin::probe);
  CHECK(s.str("device") == "cpu");
}

TEST_CASE("the config file is parsed once per process, however many readers look at it") {
  accelkit::test::TempDir dir;
  const std::string path = dir.str() + "/accelkit.toml";
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::binary) << text; };
  write("threads = 2\ndevice = \"cpu\"\n\n[routing]\nfft = \"cpu\"\n\n[train]\nsteps = 7\n");

  const std::size_t before = config_detail::parse_count();
  // What `accelkit info` and `accelkit train` do: resolve the settings (the CLI, then
  // Context::create again), read [routing], read [train].
  Settings first = Settings::resolve(inputs(path));
  Settings again = Settings::resolve(inputs(path));
  CHECK(read_routing_config(path).size() == 1);
  CHECK(routing_config_problems(path).empty());
  CHECK(train_config_from(again).steps == 7);
  CHECK(std::get<std::int64_t>(first.get("threads").value) == 2);
  CHECK(config_detail::parse_count() - before == 1);

  // New bytes are a new document: parsed once more, and read as they are now.
  write("threads = 3\n[train]\nsteps = 9\n");
  Settings changed = Settings::resolve(inputs(path));
  CHECK(std::get<std::int64_t>(changed.get("threads").value) == 3);
  CHECK(train_config_from(changed).steps == 9);
  CHECK(read_routing_config(path).empty());
  CHECK(config_detail::parse_count() - before == 2);
}
