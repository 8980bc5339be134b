// Settings with provenance. Layers, lowest first: built-in defaults < profile < config file
// (TOML: --config or ACCELKIT_CONFIG) < environment < command line; later layers (probe,
// benchmark) are set by the runtime. Every effective value remembers its origin, the exact
// source (variable, file:line:column, option) and why.
//
// Bad input is refused whole: resolve() throws SettingsError and nothing is applied.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace accelkit {

enum class Origin { default_value, profile, file, env, cli, probe, benchmark };
const char* to_string(Origin o) noexcept;  // "default", "profile", "file", "env", "cli", "probe", "benchmark"

enum class SettingType { boolean, integer, string, string_list };
const char* to_string(SettingType t) noexcept;  // "boolean", "integer", "string", "array of strings"

using SettingValue = std::variant<bool, std::int64_t, std::string, std::vector<std::string>>;
std::string format_value(const SettingValue& v);  // true, 4, "cpu" -> cpu, [a, b]

struct SettingSpec {
  std::string key;                   // "device"
  SettingType type;
  SettingValue default_value;
  std::vector<std::string> allowed;  // for enumerated strings; empty = any
  std::string env;                   // "ACCELKIT_DEVICE", or "" when none
  std::string help;                  // one line
  std::int64_t min = 0;              // integers: inclusive bounds
  std::int64_t max = INT64_MAX;
};

// The schema, in display order: device, no_gpu, precision, tf32, compile, sdpa_backend,
// fused_optimizer, threads, batch_size, profile, sampler, autotune, autotune_cache, log_level, prefer, require.
const std::vector<SettingSpec>& settings_schema();

// The closest schema key by edit distance, or "" when nothing is close.
std::string nearest_setting_key(std::string_view key);
// The same guess among any `candidates` (for other components' config tables).
std::string nearest_word(std::string_view word, const std::vector<std::string>& candidates);

// Top-level TOML tables owned by other components ([train], [bench], [routing]): Settings
// skips them (a non-table value under such a name is still an error); their owners read the
// same file through Settings::config_file().
const std::vector<std::string>& component_tables();
bool is_component_table(std::string_view key);

struct Effective {
  SettingValue value;
  Origin origin = Origin::default_value;
  std::string source;  // "built-in", "profile maximum_performance", "/p/x.toml:3:1",
                       // "ACCELKIT_DEVICE", "--device"
  std::string why;     // optional, one line
};

class SettingsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SettingsInputs {
  std::optional<std::string> config_path;  // --config; when unset, ACCELKIT_CONFIG
  // From the command line, as typed: {"device", "cuda:1"}, {"no_gpu", "true"}; the option name
  // for messages is "--" + key with '_' -> '-'.
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

  const Effective& get(std::string_view key) const;  // throws std::out_of_range for a non-key
  std::string str(std::string_view key) const;
  bool flag(std::string_view key) const;
  std::int64_t integer(std::string_view key) const;
  std::vector<std::string> list(std::string_view key) const;
  // Where the value came from, for messages: its source, or its origin when it has none.
  std::string origin_of(std::string_view key) const;

  // A later layer (probe, benchmark). Validated like any input; throws SettingsError.
  void set(std::string_view key, SettingValue value, Origin origin, std::string source, std::string why = {});

  // Every key in schema order.
  std::vector<std::pair<std::string, Effective>> all() const;

  // The config file that was read, if any.
  const std::optional<std::string>& config_file() const noexcept { return config_file_; }

 private:
  std::map<std::string, Effective, std::less<>> values_;
  std::optional<std::string> config_file_;
};

}  // namespace accelkit
