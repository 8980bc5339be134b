// Settings: layering, provenance, profiles and every way a bad input is refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "accelkit/routing.hpp"
#include "accelkit/settings.hpp"
#include "accelkit/train_config.hpp"
#include "config_file.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace settings_suite {

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

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("schema: display order, types, env names and options, [routing] and [train] as sections") {
  const auto& schema = settings_schema();
  std::vector<std::string> top;
  std::size_t routing = 0, train = 0;
  for (const auto& spec : schema) {
    if (spec.key.rfind("routing.", 0) == 0) ++routing;
    else if (spec.key.rfind("train.", 0) == 0) ++train;
    else top.push_back(spec.key);
  }
  CHECK(top == std::vector<std::string>{"device", "no_gpu", "precision", "tf32", "compile", "sdpa_backend",
                                        "fused_optimizer", "adamw_implementation", "master_weights", "threads",
                                        "blas_kernels", "kernels", "malloc_reuse", "batch_size", "prefetch", "memory_margin", "batch_step_limit", "profile", "sampler",
                                        "guard_interval", "guard_policy", "guard_temperature", "guard_hysteresis",
                                        "guard_power", "autotune", "step_tuning", "step_retune",
                                        "channels_last", "autotune_cache", "log_level", "plugin_scan", "plugin_scan_timeout",
                                        "plugin_scan_memory", "prefer", "require", "extension_devices", "dist_backend", "dist_timeout",
                                        "dist_bucket_mb"});
  CHECK(routing == op_class_names().size());
  CHECK(train == 13);
  for (const auto& spec : schema) {
    CAPTURE(spec.key);
    CHECK(spec.default_value.index() == static_cast<size_t>(spec.type));
    CHECK(!spec.help.empty());
    CHECK(spec.store);
    const bool section = spec.key.find('.') != std::string::npos;
    // Sections are file-only; every top-level key has an option and a variable.
    CHECK(section == spec.option.empty());
    CHECK(section == spec.env.empty());
    if (!section) CHECK(spec.env == "ACCELKIT_" + upper(spec.key));
    // The default passes the schema's own checks and is stored into the typed config.
    if (!spec.allowed.empty())
      CHECK(std::find(spec.allowed.begin(), spec.allowed.end(), std::get<std::string>(spec.default_value)) !=
            spec.allowed.end());
  }
  CHECK(find_setting("device")->option == "--device");
  CHECK(find_setting("no_gpu")->option == "--no-gpu");
  CHECK(find_setting("routing.fft")->allowed == std::vector<std::string>{"auto", "cpu", "device"});
  CHECK(find_setting("train.lr")->type == SettingType::number);
  CHECK(find_setting("nope") == nullptr);
  CHECK(std::string(to_string(SettingType::string_list)) == "array of strings");
  CHECK(std::string(to_string(Origin::default_value)) == "default");
}

TEST_CASE("the typed config: every value typed, with where it came from") {
  auto s = Settings::resolve(inputs({}, {{"device", "cuda:1"}, {"threads", "3"}, {"compile", "graph"}},
                                    {{"ACCELKIT_PRECISION", "bf16"}, {"ACCELKIT_TF32", "off"}}));
  const Config& c = s.config();
  CHECK(c.device->plugin == "cuda");
  CHECK(c.device->index == std::size_t{1});
  CHECK(c.device.from() == "--device");
  CHECK(c.device.origin == Origin::cli);
  CHECK(*c.precision == Dtype::bf16);
  CHECK(c.precision.from() == "ACCELKIT_PRECISION");
  CHECK(*c.tf32 == Toggle::off);
  CHECK(*c.threads == 3);
  CHECK(*c.compile == CompileMode::graph);
  CHECK(c.compile.user_set());
  CHECK(*c.fused_optimizer == Toggle::automatic);
  CHECK_FALSE(c.fused_optimizer.user_set());
  CHECK(*c.profile == Profile::balanced);
  CHECK(*c.log_level == LogLevel::warn);
  CHECK(*c.route(OpClass::fft) == RouteTarget::automatic);
  CHECK(*c.train.steps == 1000);

  // auto is "no dtype": the plugin's rules decide.
  CHECK_FALSE(*Settings().config().precision);
  CHECK(Settings()->device->automatic());
  CHECK(Settings()->device->str() == "auto");

  // The device selector parses exactly what the setting allows.
  CHECK(DeviceSelector::parse("cuda:12")->str() == "cuda:12");
  CHECK_FALSE(DeviceSelector::parse("cuda:"));
  CHECK_FALSE(DeviceSelector::parse("cuda:-1"));
  CHECK_FALSE(DeviceSelector::parse("cuda:99999999999"));
  CHECK_FALSE(DeviceSelector::parse("auto:0"));
  CHECK_FALSE(DeviceSelector::parse("CUDA"));
}

TEST_CASE("defaults: every key built-in") {
  Settings s;
  CHECK(s.text("device") == "auto");
  CHECK((*s->no_gpu) == false);
  CHECK(s.text("precision") == "auto");
  CHECK(s.text("tf32") == "auto");
  CHECK(s.text("compile") == "auto");
  CHECK(s.text("sdpa_backend") == "auto");
  CHECK(s.text("fused_optimizer") == "auto");
  CHECK((*s->threads) == 0);
  CHECK((*s->batch_size) == 0);
  CHECK(s.text("profile") == "balanced");
  CHECK((*s->sampler) == true);
  CHECK((*s->autotune) == false);
  CHECK(s.text("log_level") == "warn");
  CHECK((*s->prefer).empty());
  CHECK((*s->require).empty());
  auto all = s.all();
  REQUIRE(all.size() == settings_schema().size());
  for (const auto& [key, eff] : all) {
    CHECK_MESSAGE(eff.origin == Origin::default_value, key);
    CHECK_MESSAGE(eff.source == "built-in", key);
    CHECK_MESSAGE(!eff.why.empty(), key);
  }
  CHECK_FALSE(s.config_file());
  CHECK_THROWS_AS(s.get("devcie"), std::out_of_range);

  // resolve() with nothing given is the same.
  auto r = Settings::resolve(inputs());
  CHECK(r.get("device").origin == Origin::default_value);
  CHECK(r.text("profile") == "balanced");
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
  CHECK(s.text("device") == "cpu");
  CHECK((*s->no_gpu));
  CHECK(s.text("precision") == "bf16");
  CHECK(s.text("tf32") == "off");
  CHECK(s.text("compile") == "off");
  CHECK(s.text("sdpa_backend") == "math");
  CHECK(s.text("fused_optimizer") == "off");
  CHECK((*s->threads) == 4);
  CHECK((*s->batch_size) == 32);
  CHECK((*s->sampler) == false);
  CHECK((*s->autotune));
  CHECK_FALSE(*s->step_tuning);
  CHECK_FALSE(*s->step_retune);
  CHECK(*s->channels_last == Toggle::on);
  CHECK(*s->dist_backend == "gloo");
  CHECK((*s->dist_timeout) == 60);
  CHECK((*s->dist_bucket_mb) == 8);
  CHECK(s.text("log_level") == "info");
  CHECK((*s->prefer) == std::vector<std::string>{"cpu", "cuda"});
  CHECK((*s->require) == std::vector<std::string>{"fp32", "memory_stats"});
  CHECK((*s->extension_devices) == std::vector<std::string>{"hostmem"});
  CHECK((*s->autotune_cache) == false);
  CHECK(s.text("master_weights") == "on");
  CHECK(s.text("blas_kernels") == "library");
  CHECK(s.text("kernels") == "off");
  CHECK(s.text("malloc_reuse") == "off");
  CHECK(s.text("adamw_implementation") == "aten-fused");
  CHECK_FALSE(*s->plugin_scan);
  CHECK(*s->plugin_scan_timeout == 30);
  CHECK(*s->plugin_scan_memory == 1024);
  CHECK(*s->memory_margin == 15);
  CHECK(*s->batch_step_limit == 0.5);
  CHECK(*s->guard_interval == 2.5);
  CHECK((*s->guard_policy == GuardPolicy::pause));
  CHECK(*s->guard_temperature == 85);
  CHECK(*s->guard_hysteresis == 8);
  CHECK(*s->guard_power == 300);
  for (const auto& [key, eff] : s.all()) {
    if (key.find('.') != std::string::npos) continue;  // [routing] and [train]: not in this file
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
  CHECK((*s->threads) == 3);

  // --config wins over ACCELKIT_CONFIG.
  auto t = Settings::resolve(inputs(fixture("full.toml"), {}, {{"ACCELKIT_CONFIG", path}}));
  CHECK((*t->threads) == 4);

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
    CHECK((*s->threads) == 3);
    CHECK(s.get("threads").origin == Origin::file);
    CHECK(s.get("batch_size").origin == Origin::default_value);
  }
  SUBCASE("env over file") {
    auto s = Settings::resolve(inputs(path, {}, {{"ACCELKIT_THREADS", "5"}, {"ACCELKIT_DEVICE", "cuda:1"}}));
    CHECK((*s->threads) == 5);
    CHECK(s.get("threads").origin == Origin::env);
    CHECK(s.get("threads").source == "ACCELKIT_THREADS");
    CHECK(s.text("device") == "cuda:1");
    CHECK(s.get("device").source == "ACCELKIT_DEVICE");
  }
  SUBCASE("cli over env over file") {
    auto s = Settings::resolve(inputs(path, {{"threads", "7"}, {"no_gpu", "true"}},
                                      {{"ACCELKIT_THREADS", "5"}, {"ACCELKIT_NO_GPU", "0"}}));
    CHECK((*s->threads) == 7);
    CHECK(s.get("threads").origin == Origin::cli);
    CHECK(s.get("threads").source == "--threads");
    CHECK((*s->no_gpu));
    CHECK(s.get("no_gpu").source == "--no-gpu");
    CHECK(s.text("device") == "cpu");  // only the file set it
    CHECK(s.get("device").origin == Origin::file);
  }
  SUBCASE("env and cli text forms") {
    auto s = Settings::resolve(inputs(std::nullopt, {{"prefer", "cuda"}, {"prefer", "rocm, cpu"}, {"log-level", "debug"}},
                                      {{"ACCELKIT_REQUIRE", " bf16 ,fused_adamw,"}, {"ACCELKIT_SAMPLER", "OFF"},
                                       {"ACCELKIT_PRECISION", ""}}));
    CHECK((*s->prefer) == std::vector<std::string>{"cuda", "rocm", "cpu"});  // repeated options accumulate
    CHECK((*s->require) == std::vector<std::string>{"bf16", "fused_adamw"});
    CHECK(s.get("require").source == "ACCELKIT_REQUIRE");
    CHECK((*s->sampler) == false);
    CHECK(s.text("log_level") == "debug");
    CHECK(s.get("log_level").source == "--log-level");
    CHECK(s.get("precision").origin == Origin::default_value);  // empty variable = unset
  }
}

TEST_CASE("the process environment is read when inputs.env is unset") {
  ::setenv("ACCELKIT_BATCH_SIZE", "64", 1);
  SettingsInputs in;
  auto s = Settings::resolve(in);
  ::unsetenv("ACCELKIT_BATCH_SIZE");
  CHECK((*s->batch_size) == 64);
  CHECK(s.get("batch_size").origin == Origin::env);
  CHECK(s.get("batch_size").source == "ACCELKIT_BATCH_SIZE");
}

TEST_CASE("profiles: chosen from the highest layer, applied as the profile layer") {
  SUBCASE("maximum_performance from the file; the file's own tf32 wins") {
    auto s = Settings::resolve(inputs(fixture("max_perf.toml")));
    CHECK(s.text("profile") == "maximum_performance");
    CHECK(s.get("profile").origin == Origin::file);
    CHECK(s.text("compile") == "graph");
    CHECK(s.get("compile").origin == Origin::profile);
    CHECK(s.get("compile").source == "profile maximum_performance");
    CHECK(s.get("compile").why == "maximum_performance turns on graph capture");
    CHECK(s.text("fused_optimizer") == "on");
    CHECK(s.get("fused_optimizer").origin == Origin::profile);
    CHECK(s.text("master_weights") == "on");
    CHECK(s.get("master_weights").origin == Origin::profile);
    CHECK(s.text("tf32") == "off");
    CHECK(s.get("tf32").origin == Origin::file);
    CHECK(s.get("sampler").origin == Origin::default_value);
  }
  SUBCASE("env profile beats the file's; the file still overrides the profile's values") {
    auto s = Settings::resolve(inputs(fixture("max_perf.toml"), {}, {{"ACCELKIT_PROFILE", "ultra_low_overhead"}}));
    CHECK(s.text("profile") == "ultra_low_overhead");
    CHECK(s.get("profile").source == "ACCELKIT_PROFILE");
    CHECK(s.text("compile") == "off");
    CHECK(s.get("compile").source == "profile ultra_low_overhead");
    CHECK((*s->sampler) == false);
    CHECK(s.get("sampler").why == "ultra_low_overhead turns off the sampler thread");
    CHECK((*s->autotune) == false);
    CHECK(s.get("autotune").origin == Origin::profile);
    CHECK(s.get("fused_optimizer").origin == Origin::default_value);  // not maximum_performance
    CHECK(s.text("master_weights") == "auto");
    CHECK(s.get("master_weights").origin == Origin::default_value);  // not maximum_performance
    CHECK(s.text("tf32") == "off");
    CHECK(s.get("tf32").origin == Origin::file);
  }
  SUBCASE("cli profile beats env and file; env and cli override the profile's values") {
    auto s = Settings::resolve(inputs(fixture("max_perf.toml"), {{"profile", "auto"}, {"autotune", "false"}},
                                      {{"ACCELKIT_PROFILE", "ultra_low_overhead"}, {"ACCELKIT_COMPILE", "graph"}}));
    CHECK(s.text("profile") == "auto");
    CHECK(s.get("profile").source == "--profile");
    CHECK((*s->autotune) == false);  // auto would turn it on; --autotune false wins
    CHECK(s.get("autotune").origin == Origin::cli);
    CHECK(s.text("compile") == "graph");
    CHECK(s.get("compile").origin == Origin::env);
  }
  SUBCASE("auto turns on autotune") {
    auto s = Settings::resolve(inputs(std::nullopt, {{"profile", "auto"}}));
    CHECK((*s->autotune));
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
  CHECK(routing_overrides(first).size() == 1);
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

TEST_CASE("docs/settings.md's settings table is the schema's (accelkit help settings)") {
  const fs::path page = fs::path(ACCELKIT_TEST_FIXTURES) / ".." / ".." / "docs" / "settings.md";
  std::ifstream in(page);
  REQUIRE(in);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string begin = "<!-- settings-table: begin -->\n", end = "<!-- settings-table: end -->";
  const auto a = text.find(begin), b = text.find(end);
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  const std::string table = text.substr(a + begin.size(), b - a - begin.size());
  CHECK_MESSAGE(table == settings_table_markdown(),
                "docs/settings.md's settings table is stale: replace it with the output of `accelkit help settings`");
  for (const auto& spec : settings_schema()) CHECK_MESSAGE(table.find("| `" + spec.key + "` |") != std::string::npos, spec.key);
}

TEST_CASE("guard thresholds that make no sense are refused as settings errors") {
  auto resolve = [](const std::string& key, const std::string& value) {
    SettingsInputs in;
    in.env = std::map<std::string, std::string>{};
    in.cli.emplace_back(key, value);
    return Settings::resolve(in);
  };
  CHECK(*resolve("guard_temperature", "0")->guard_temperature == 0);
  CHECK(*resolve("guard_temperature", "83.5")->guard_temperature == 83.5);
  CHECK_THROWS_AS(resolve("guard_temperature", "-5"), SettingsError);
  for (const char* bad : {"10", "29.9", "150.5", "1e7"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(resolve("guard_temperature", bad), doctest::Contains("between 30 and 150 C"), SettingsError);
  }
  CHECK_THROWS_WITH_AS(resolve("guard_temperature", "20"), doctest::Contains("room temperature"), SettingsError);
  CHECK_THROWS_WITH_AS(resolve("guard_temperature", "400"), doctest::Contains("never act"), SettingsError);
  CHECK_THROWS_AS(resolve("guard_interval", "-1"), SettingsError);
  CHECK_THROWS_AS(resolve("guard_interval", "0.001"), SettingsError);
  CHECK_THROWS_AS(resolve("guard_hysteresis", "60"), SettingsError);
  CHECK_THROWS_AS(resolve("guard_policy", "explode"), SettingsError);
  CHECK_THROWS_AS(resolve("guard_power", "-3"), SettingsError);
  CHECK(*resolve("profile", "ultra_low_overhead")->guard_interval == 0);
}

}  // namespace settings_suite
