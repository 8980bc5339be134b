// Settings: one schema, typed values, provenance.
//
// settings_schema() declares every key once - name, type, allowed values, default, environment
// variable, command-line option, help line - and the TOML reader, the environment reader, the
// CLI's options, `accelkit report` and docs/settings.md's table all come from it. [routing] and
// [train] are sections of the same schema ("routing.fft", "train.steps").
//
// Layers, lowest first: built-in defaults < profile < config file (TOML: --config or
// ACCELKIT_CONFIG, parsed once per process) < environment < command line. Settings::resolve()
// validates every layer against the schema and refuses bad input whole (SettingsError: the
// file:line:column, the unknown key and its nearest valid one, the key and the expected type);
// nothing is half-applied. Downstream code reads the typed Config (enums, ints), each value
// with where it came from; it never parses setting text. What the runtime decides later (the
// auto-tuner, a profile's request a device cannot honour) is recorded beside the settings
// (RuntimeDecision, context.hpp), never written into them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "accelkit/op_class.hpp"
#include "accelkit/sdk/precision.hpp"

namespace accelkit {

enum class Origin { default_value, profile, file, env, cli };
const char* to_string(Origin o) noexcept;  // "default", "profile", "file", "env", "cli"

enum class SettingType { boolean, integer, number, string, string_list };
const char* to_string(SettingType t) noexcept;  // "boolean", "integer", "number", "string", "array of strings"

// A value as the layers carry it, before it is typed. The index follows SettingType.
using SettingValue = std::variant<bool, std::int64_t, double, std::string, std::vector<std::string>>;
std::string format_value(const SettingValue& v);  // true, 4, 0.001, "cpu" -> cpu, [a, b]

// ---- typed values -------------------------------------------------------------------------

// auto | <plugin> | <plugin>:<index>
struct DeviceSelector {
  std::string plugin;                // "" = auto
  std::optional<std::size_t> index;  // only with a plugin
  bool automatic() const noexcept { return plugin.empty(); }
  std::string str() const;           // "auto", "cuda", "cuda:1"
  // nullopt unless `text` is auto, <plugin> or <plugin>:<digits> (plugin: [a-z0-9_-]+).
  static std::optional<DeviceSelector> parse(std::string_view text);
  bool operator==(const DeviceSelector& o) const { return plugin == o.plugin && index == o.index; }
};

enum class CompileMode { automatic, off, graph };
enum class SdpaBackend { automatic, flash, mem_efficient, math };
enum class Profile { balanced, ultra_low_overhead, maximum_performance, automatic };
enum class LogLevel { trace, debug, info, warn, error, off };
enum class RouteTarget { automatic, cpu, device };
enum class GuardPolicy { warn, pause, stop };

const char* to_string(CompileMode m) noexcept;  // "auto", "off", "graph"
const char* to_string(SdpaBackend b) noexcept;  // "auto", "flash", "mem_efficient", "math"
const char* to_string(Profile p) noexcept;      // "balanced", ..., "auto"
const char* to_string(LogLevel l) noexcept;     // "trace", ..., "off"
const char* to_string(RouteTarget t) noexcept;  // "auto", "cpu", "device"
const char* to_string(GuardPolicy p) noexcept;  // "warn", "pause", "stop"

// One effective value and where it came from.
template <typename T>
struct Setting {
  T value{};
  Origin origin = Origin::default_value;
  std::string source = "built-in";  // "profile maximum_performance", "/p/x.toml:3:1", "ACCELKIT_DEVICE", "--device"
  std::string why;                  // one line
  const T& operator*() const noexcept { return value; }
  const T* operator->() const noexcept { return &value; }
  // Where it came from, for messages: "--device", "/p/x.toml:3:1", "built-in".
  const std::string& from() const noexcept { return source; }
  // Set by the user (config file, environment, command line), not a default or a profile.
  bool user_set() const noexcept { return origin == Origin::file || origin == Origin::env || origin == Origin::cli; }
};

// The [train] section: what `accelkit train` runs (train_config.hpp turns it into a TrainConfig).
struct TrainSettings {
  Setting<std::int64_t> steps, batch_size, micro_batches, width, depth, outputs;
  Setting<double> lr, weight_decay;
  Setting<std::int64_t> seed, log_every;
  Setting<std::string> checkpoint_dir;
  Setting<std::int64_t> checkpoint_every, keep_last;
};

// Every setting, typed. Built by Settings::resolve() from the schema.
struct Config {
  Setting<DeviceSelector> device;
  Setting<bool> no_gpu;
  Setting<std::optional<Dtype>> precision;  // nullopt = auto
  Setting<Toggle> tf32;
  Setting<CompileMode> compile;
  Setting<SdpaBackend> sdpa_backend;
  Setting<Toggle> fused_optimizer;
  Setting<std::string> adamw_implementation;  // "auto" (measured) or an implementation's name
  Setting<Toggle> master_weights;
  Setting<int> threads;                       // 0 = the plugin's choice
  Setting<BlasKernels> blas_kernels;
  Setting<Toggle> kernels;                    // the plugin's operator kernels
  Setting<Toggle> malloc_reuse;               // glibc's malloc keeps freed memory for the next step
  Setting<std::int64_t> batch_size;           // 0 = auto
  Setting<int> prefetch;                      // batches kept ready by accelkit::Prefetcher; 0 = none
  Setting<int> memory_margin;                 // % of the device's memory the batch-size finder leaves free
  Setting<double> batch_step_limit;           // seconds a step may take at the host's found batch; 0 = none
  Setting<Profile> profile;
  Setting<bool> sampler;
  // The thermal and power guard (guard.hpp) during training: its sampler's period (0 = off),
  // what it does at the threshold, the thresholds (0 = the device's own / none).
  Setting<double> guard_interval;     // seconds
  Setting<GuardPolicy> guard_policy;
  Setting<double> guard_temperature;  // C; 0 = the device's own slowdown threshold
  Setting<double> guard_hysteresis;   // C below the threshold before a pause ends
  Setting<double> guard_power;        // W; 0 = none
  Setting<bool> autotune;
  Setting<bool> step_tuning;  // observe, then switch (step_tuning.hpp)
  Setting<bool> step_retune;  // revisit that decision when the load or the step's time changes
  Setting<Toggle> channels_last;  // step tuning times the plan with channels-last convolution weights too
  Setting<bool> autotune_cache;
  Setting<LogLevel> log_level;
  Setting<bool> plugin_scan;                  // examine new plugin files in a separate process
  Setting<int> plugin_scan_timeout;           // seconds
  Setting<std::int64_t> plugin_scan_memory;   // MiB the examining process may allocate; 0 = no limit
  Setting<std::vector<std::string>> prefer;   // plugin names
  Setting<std::vector<std::string>> require;  // capability names
  // Plugins whose new device type is registered with LibTorch at start and offered through the
  // device-generic torch plugin only (Context::create).
  Setting<std::vector<std::string>> extension_devices;
  // Data-parallel training (distributed.hpp): the collective backend ("auto": the plugin's),
  // the seconds a rendezvous or collective may wait for a rank, the gradient bucket size.
  Setting<std::string> dist_backend;
  Setting<int> dist_timeout;    // seconds
  Setting<int> dist_bucket_mb;  // MiB
  std::array<Setting<RouteTarget>, kOpClassCount> routing;  // by OpClass, in kOpClassNames order
  TrainSettings train;

  const Setting<RouteTarget>& route(OpClass op) const noexcept { return routing[static_cast<std::size_t>(op)]; }
};

// ---- the schema ---------------------------------------------------------------------------

struct Effective {
  SettingValue value;
  Origin origin = Origin::default_value;
  std::string source;  // "built-in", "profile maximum_performance", "/p/x.toml:3:1",
                       // "ACCELKIT_DEVICE", "--device"
  std::string why;     // optional, one line
};

struct SettingSpec {
  std::string key;                   // "device", "routing.fft", "train.steps"
  SettingType type = SettingType::string;
  SettingValue default_value;
  std::vector<std::string> allowed;  // enumerated strings; empty = any
  std::string env;                   // "ACCELKIT_DEVICE"; "" = none
  // "--device"; "" = not on the command line. A boolean's option is a switch that sets it, with
  // a --no- form when it is on by default - unless option_turns_off: then the option is the
  // one switch there is, and it turns the boolean off (autotune_cache: --no-cache).
  std::string option;
  bool option_turns_off = false;
  std::string help;                  // one line
  std::int64_t min = 0;              // integers: inclusive bounds
  std::int64_t max = INT64_MAX;
  bool min_exclusive = false;        // numbers: min is exclusive (lr > 0)
  // Checks a value of the right type beyond `allowed` and the bounds: "" or the problem.
  std::string (*check)(const SettingValue&) = nullptr;
  // Stores a checked value into its typed field.
  std::function<void(Config&, const Effective&)> store;
};

// The schema, in display order: the top-level keys, then [routing], then [train].
const std::vector<SettingSpec>& settings_schema();
// The spec of `key`, or nullptr.
const SettingSpec* find_setting(std::string_view key);
// The sections ("routing", "train"): tables whose keys are schema keys "<section>.<key>".
const std::vector<std::string>& settings_sections();

// The schema as a Markdown table (key, type, default, values, variable, option, meaning): what
// `accelkit help settings` prints and docs/settings.md's table is (a test compares them).
std::string settings_table_markdown();

// The closest schema key by edit distance, or "" when nothing is close.
std::string nearest_setting_key(std::string_view key);
// The same guess among any `candidates`. Bounded: a word longer than any candidate by more
// than a few characters has no guess.
std::string nearest_word(std::string_view word, const std::vector<std::string>& candidates);

class SettingsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SettingsInputs {
  std::optional<std::string> config_path;  // --config; when unset, ACCELKIT_CONFIG
  // From the command line, as typed: {"device", "cuda:1"}, {"no_gpu", "true"}; the option name
  // for messages is the spec's option.
  std::vector<std::pair<std::string, std::string>> cli;
  // The environment; when unset, read from the process with secure_getenv.
  std::optional<std::map<std::string, std::string>> env;
};

class Settings {
 public:
  Settings();  // defaults only

  // Builds all layers or throws SettingsError naming the file:line:column, the unknown key
  // and its nearest valid key, or the key and its expected type. Nothing is half-applied.
  static Settings resolve(const SettingsInputs& inputs);

  // The typed values; what code acts on.
  const Config& config() const noexcept { return config_; }
  const Config* operator->() const noexcept { return &config_; }

  // One value as the layers carried it, for display: throws std::out_of_range for a non-key.
  const Effective& get(std::string_view key) const;
  // The same, as text ("cpu", "4", "[a, b]").
  std::string text(std::string_view key) const { return format_value(get(key).value); }

  // Every key in schema order.
  std::vector<std::pair<std::string, Effective>> all() const;

  // The config file that was read, if any.
  const std::optional<std::string>& config_file() const noexcept { return config_file_; }

 private:
  void build_config();
  std::map<std::string, Effective, std::less<>> values_;
  std::optional<std::string> config_file_;
  Config config_;
};

}  // namespace accelkit
