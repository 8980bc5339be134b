// Settings: schema, layering (default < profile < file < env < cli) and validation.
#include "accelkit/settings.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include <toml++/toml.h>

#include "accelkit/routing.hpp"
#include "config_file.hpp"
#include "toml_text.hpp"
#include "strings.hpp"

namespace accelkit {

const char* to_string(Origin o) noexcept {
  switch (o) {
    case Origin::default_value: return "default";
    case Origin::profile: return "profile";
    case Origin::file: return "file";
    case Origin::env: return "env";
    case Origin::cli: return "cli";
    case Origin::probe: return "probe";
    case Origin::benchmark: return "benchmark";
  }
  return "unknown";
}

const char* to_string(SettingType t) noexcept {
  switch (t) {
    case SettingType::boolean: return "boolean";
    case SettingType::integer: return "integer";
    case SettingType::string: return "string";
    case SettingType::string_list: return "array of strings";
  }
  return "unknown";
}

std::string format_value(const SettingValue& v) {
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  std::string out = "[";
  const auto& list = std::get<std::vector<std::string>>(v);
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + list[i];
  return out + "]";
}

const std::vector<SettingSpec>& settings_schema() {
  using S = SettingType;
  using Strings = std::vector<std::string>;
  auto text = [](const char* s) { return SettingValue{std::string(s)}; };
  auto integer = [](std::int64_t i) { return SettingValue{i}; };
  static const std::vector<SettingSpec> schema = {
      {"device", S::string, text("auto"), {}, "ACCELKIT_DEVICE",
       "device to run on: auto, <plugin> or <plugin>:<index>"},
      {"no_gpu", S::boolean, SettingValue{false}, {}, "ACCELKIT_NO_GPU", "never use a GPU"},
      {"precision", S::string, text("auto"), {"auto", "fp32", "bf16", "fp16"}, "ACCELKIT_PRECISION",
       "compute precision (autocast)"},
      {"tf32", S::string, text("auto"), {"auto", "on", "off"}, "ACCELKIT_TF32",
       "TF32 for fp32 matmul and convolutions"},
      {"compile", S::string, text("auto"), {"off", "graph", "auto"}, "ACCELKIT_COMPILE",
       "graph capture of the step"},
      {"sdpa_backend", S::string, text("auto"), {"auto", "flash", "mem_efficient", "math"},
       "ACCELKIT_SDPA_BACKEND", "scaled dot-product attention backend"},
      {"fused_optimizer", S::string, text("auto"), {"auto", "on", "off"}, "ACCELKIT_FUSED_OPTIMIZER",
       "fused optimizer kernels"},
      {"adamw_implementation", S::string, text("auto"), {}, "ACCELKIT_ADAMW_IMPLEMENTATION",
       "AdamW implementation: auto (the fastest the plugin offers, measured) or one by name "
       "(accelkit report lists them: fused-avx2, aten-fused, ...)"},
      {"master_weights", S::string, text("off"), {"off", "on"}, "ACCELKIT_MASTER_WEIGHTS",
       "bf16 model weights with the fp32 master copy in the fused optimizer"},
      {"threads", S::integer, integer(0), {}, "ACCELKIT_THREADS", "CPU threads (0 = auto)", 0, 65536},
      {"blas_kernels", S::string, text("auto"), {"auto", "library"}, "ACCELKIT_BLAS_KERNELS",
       "CPU BLAS kernels: auto (replace a set narrower than the CPU runs) or library (its own)"},
      {"batch_size", S::integer, integer(0), {}, "ACCELKIT_BATCH_SIZE", "batch size (0 = auto)", 0,
       INT32_MAX},
      {"profile", S::string, text("balanced"),
       {"balanced", "ultra_low_overhead", "maximum_performance", "auto"}, "ACCELKIT_PROFILE",
       "tuning profile"},
      {"sampler", S::boolean, SettingValue{true}, {}, "ACCELKIT_SAMPLER",
       "background telemetry sampler thread"},
      {"autotune", S::boolean, SettingValue{false}, {}, "ACCELKIT_AUTOTUNE",
       "benchmark the candidates and cache the decision"},
      {"autotune_cache", S::boolean, SettingValue{true}, {}, "ACCELKIT_AUTOTUNE_CACHE",
       "read and write the auto-tuner's cache (--no-cache: off)"},
      {"log_level", S::string, text("warn"), {"trace", "debug", "info", "warn", "error", "off"},
       "ACCELKIT_LOG_LEVEL", "log level"},
      {"prefer", S::string_list, SettingValue{Strings{}}, {}, "ACCELKIT_PREFER",
       "plugins to prefer, in order"},
      {"require", S::string_list, SettingValue{Strings{}}, {}, "ACCELKIT_REQUIRE",
       "capabilities the device must have"},
  };
  return schema;
}

namespace {

const SettingSpec* find_spec(std::string_view key) {
  for (const auto& spec : settings_schema())
    if (spec.key == key) return &spec;
  return nullptr;
}

// A key that is a section (table) holding dotted schema keys, e.g. "routing" for
// "routing.order". None yet; the TOML walker recurses into these.
bool is_section(std::string_view key) {
  for (const auto& spec : settings_schema())
    if (spec.key.size() > key.size() && spec.key.compare(0, key.size(), key) == 0 &&
        spec.key[key.size()] == '.')
      return true;
  return false;
}

std::string normalise_key(std::string_view key) {
  std::string out(key);
  for (auto& c : out) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Optimal string alignment distance: a transposition counts as one edit.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The single nearest of `candidates` within a few edits (or a unique prefix), else "".
std::string nearest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string w = normalise_key(word);
  if (w.empty()) return {};
  size_t limit = w.size() <= 3 ? 1 : w.size() <= 6 ? 2 : 3;
  std::string best;
  size_t best_d = limit + 1;
  bool tie = false;
  for (const auto& c : candidates) {
    size_t d = edit_distance(w, c);
    if (d < best_d) {
      best_d = d;
      best = c;
      tie = false;
    } else if (d == best_d) {
      tie = true;
    }
  }
  if (!best.empty()) return tie ? std::string() : best;  // a guess between two is no help
  if (w.size() >= 4) {  // "sdpa" -> "sdpa_backend"
    std::string only;
    for (const auto& c : candidates)
      if (c.compare(0, w.size(), w) == 0) {
        if (!only.empty()) return {};
        only = c;
      }
    return only;
  }
  return {};
}

std::vector<std::string> schema_keys() {
  std::vector<std::string> keys;
  for (const auto& spec : settings_schema()) keys.push_back(spec.key);
  return keys;
}

const char* with_article(SettingType t) {
  switch (t) {
    case SettingType::boolean: return "a boolean";
    case SettingType::integer: return "an integer";
    case SettingType::string: return "a string";
    case SettingType::string_list: return "an array of strings";
  }
  return "a value";
}

SettingType type_of(const SettingValue& v) {
  switch (v.index()) {
    case 0: return SettingType::boolean;
    case 1: return SettingType::integer;
    case 2: return SettingType::string;
    default: return SettingType::string_list;
  }
}


bool all_chars(std::string_view s, const char* extra) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [extra](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || std::strchr(extra, c) != nullptr;
  });
}

bool is_plugin_name(std::string_view s) { return all_chars(s, "_-"); }

// auto | <plugin> | <plugin>:<N>
bool is_device(std::string_view s) {
  auto colon = s.find(':');
  if (colon == std::string_view::npos) return is_plugin_name(s);
  auto index = s.substr(colon + 1);
  return is_plugin_name(s.substr(0, colon)) && !index.empty() &&
         std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_capability_name(std::string_view s) { return all_chars(s, "_-."); }

// Checks a value of the right type against the spec's enum, bounds and shape. Returns the
// problem ("must be ..., got ...") or "".
std::string check_value(const SettingSpec& spec, const SettingValue& value) {
  if (type_of(value) != spec.type)
    return std::string("must be ") + with_article(spec.type) + ", got " + to_string(type_of(value));
  if (auto* i = std::get_if<std::int64_t>(&value)) {
    if (*i < spec.min || *i > spec.max) {
      if (spec.max == INT64_MAX) return "must be at least " + std::to_string(spec.min) + ", got " + std::to_string(*i);
      return "must be between " + std::to_string(spec.min) + " and " + std::to_string(spec.max) +
             ", got " + std::to_string(*i);
    }
  } else if (auto* s = std::get_if<std::string>(&value)) {
    if (!spec.allowed.empty() && std::find(spec.allowed.begin(), spec.allowed.end(), *s) == spec.allowed.end()) {
      std::string msg = "must be one of " + text::join(spec.allowed, ", ") + ", got '" + *s + "'";
      if (auto guess = nearest(*s, spec.allowed); !guess.empty()) msg += "; did you mean '" + guess + "'?";
      return msg;
    }
    if (spec.key == "device" && !is_device(*s))
      return "must be auto, <plugin> or <plugin>:<index> (lowercase letters, digits, '_', '-'), got '" + *s + "'";
  } else if (auto* list = std::get_if<std::vector<std::string>>(&value)) {
    for (const auto& item : *list) {
      if (spec.key == "prefer" && !is_plugin_name(item))
        return "must list plugin names (lowercase letters, digits, '_', '-'), got '" + item + "'";
      if (spec.key == "require" && !is_capability_name(item))
        return "must list capability names (lowercase letters, digits, '_', '-', '.'), got '" + item + "'";
    }
  }
  return {};
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Text from the environment or the command line, typed by the spec. Lists are comma separated.
std::optional<SettingValue> parse_text(const SettingSpec& spec, std::string_view raw, std::string& problem) {
  std::string_view text = trim(raw);
  switch (spec.type) {
    case SettingType::boolean: {
      std::string t = normalise_key(text);
      if (t == "true" || t == "1" || t == "yes" || t == "on") return SettingValue{true};
      if (t == "false" || t == "0" || t == "no" || t == "off") return SettingValue{false};
      problem = "must be a boolean (true/false, 1/0, yes/no, on/off), got '" + std::string(raw) + "'";
      return std::nullopt;
    }
    case SettingType::integer: {
      std::int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec == std::errc::result_out_of_range || ec != std::errc() ||
          end != text.data() + text.size()) {
        problem = "must be an integer, got '" + std::string(raw) + "'";
        return std::nullopt;
      }
      return SettingValue{v};
    }
    case SettingType::string:
      return SettingValue{std::string(text)};
    case SettingType::string_list: {
      std::vector<std::string> items;
      size_t start = 0;
      while (start <= text.size()) {
        size_t comma = text.find(',', start);
        if (comma == std::string_view::npos) comma = text.size();
        auto item = trim(text.substr(start, comma - start));
        if (!item.empty()) items.emplace_back(item);
        start = comma + 1;
      }
      return SettingValue{std::move(items)};
    }
  }
  return std::nullopt;
}


std::optional<SettingValue> from_toml(const SettingSpec& spec, const toml::node& node, std::string& problem) {
  auto wrong = [&](const char* got) {
    problem = std::string("must be ") + with_article(spec.type) + ", got " + got;
    return std::nullopt;
  };
  switch (spec.type) {
    case SettingType::boolean:
      if (auto* b = node.as_boolean()) return SettingValue{b->get()};
      return wrong(toml_type_name(node.type()));
    case SettingType::integer:
      if (auto* i = node.as_integer()) return SettingValue{i->get()};
      return wrong(toml_type_name(node.type()));
    case SettingType::string:
      if (auto* s = node.as_string()) return SettingValue{s->get()};
      return wrong(toml_type_name(node.type()));
    case SettingType::string_list: {
      auto* arr = node.as_array();
      if (!arr) return wrong(toml_type_name(node.type()));
      std::vector<std::string> items;
      for (size_t i = 0; i < arr->size(); ++i) {
        auto* s = (*arr)[i].as_string();
        if (!s) {
          std::string got = std::string("array with ") + toml_type_name((*arr)[i].type()) + " at index " + std::to_string(i);
          return wrong(got.c_str());
        }
        items.push_back(s->get());
      }
      return SettingValue{std::move(items)};
    }
  }
  return std::nullopt;
}

std::string option_name(const SettingSpec& spec) {
  if (spec.key == "autotune_cache") return "--no-cache";  // the only way to set it on the command line
  std::string opt = "--" + spec.key;
  std::replace(opt.begin(), opt.end(), '_', '-');
  return opt;
}

std::string did_you_mean(std::string_view key, const char* prefix = "") {
  auto guess = nearest_setting_key(key);
  if (guess.empty()) return {};
  return std::string("; did you mean '") + prefix + guess + "'?";
}

// One validated value from one layer.
struct Entry {
  const SettingSpec* spec;
  Effective effective;
};
using Layer = std::vector<Entry>;

// Collects every problem so that a bad input is reported in full, then refused whole.
class Problems {
 public:
  void add(std::string msg) { list_.push_back(std::move(msg)); }
  void raise_if_any() const {
    if (list_.empty()) return;
    throw SettingsError(text::join(list_, "\n"));
  }

 private:
  std::vector<std::string> list_;
};


// Walks a TOML table: schema keys, sections (recursed into) or unknown keys.
void read_table(const toml::table& table, const std::string& prefix, const std::string& path, Layer& out,
                Problems& problems) {
  // In file order, so that problems are reported top to bottom (the table is sorted by key).
  for (const auto& [k_ptr, node_ptr] : config_detail::in_file_order(table)) {
    const toml::key& k = *k_ptr;
    const toml::node& node = *node_ptr;
    std::string key = prefix + std::string(k.str());
    std::string at = toml_position(path, k.source());
    if (const SettingSpec* spec = find_spec(key)) {
      std::string problem;
      auto value = from_toml(*spec, node, problem);
      if (value && (problem = check_value(*spec, *value)).empty())
        out.push_back({spec, {std::move(*value), Origin::file, at, "set in the config file"}});
      else
        problems.add("'" + key + "' in " + at + " " + problem);
    } else if (node.is_table() && is_section(key)) {
      read_table(*node.as_table(), key + ".", path, out, problems);
    } else if (prefix.empty() && is_component_table(key)) {
      // Read by its own component ([train] by the trainer, ...); only its shape is checked here.
      if (!node.is_table())
        problems.add("'" + key + "' in " + at + " must be a table ([" + key + "]), got " + toml_type_name(node.type()));
    } else if (std::string near_table = prefix.empty() && node.is_table() ? nearest(key, component_tables()) : "";
               !near_table.empty()) {
      problems.add("unknown table [" + key + "] in " + at + "; did you mean [" + near_table + "]?");
    } else {
      std::string msg = "unknown setting '" + key + "' in " + at + did_you_mean(key);
      if (node.is_table())
        msg += " ([" + key + "] is a table; settings are top-level keys, e.g. device = \"cpu\")";
      problems.add(std::move(msg));
    }
  }
}

Layer read_file(const std::string& path, const std::string& from, Problems& problems) {
  Layer layer;
  const config_detail::ParsedConfig config = config_detail::parse_config(path);
  if (!config.read_error.empty()) {
    problems.add("cannot read config file " + path + " (from " + from + "): " + config.read_error);
    return layer;
  }
  if (!config.root) {
    problems.add(config.parse_error);
    return layer;
  }
  read_table(*config.root, "", path, layer, problems);
  return layer;
}

using Env = std::map<std::string, std::string>;

Env read_process_env() {
  Env env;
  auto take = [&env](const std::string& name) {
    if (const char* v = secure_getenv(name.c_str())) env[name] = v;
  };
  take("ACCELKIT_CONFIG");
  for (const auto& spec : settings_schema())
    if (!spec.env.empty()) take(spec.env);
  return env;
}

// An empty variable counts as unset.
Layer read_env(const Env& env, Problems& problems) {
  Layer layer;
  for (const auto& spec : settings_schema()) {
    if (spec.env.empty()) continue;
    auto it = env.find(spec.env);
    if (it == env.end() || trim(it->second).empty()) continue;
    std::string problem;
    auto value = parse_text(spec, it->second, problem);
    if (value && (problem = check_value(spec, *value)).empty())
      layer.push_back({&spec, {std::move(*value), Origin::env, spec.env, "set in the environment"}});
    else
      problems.add(spec.env + " " + problem);
  }
  return layer;
}

// A repeated option replaces the earlier one, except lists, which accumulate.
Layer read_cli(const std::vector<std::pair<std::string, std::string>>& cli, Problems& problems) {
  Layer layer;
  for (const auto& [name, text] : cli) {
    std::string key = normalise_key(name);
    const SettingSpec* spec = find_spec(key);
    if (!spec) {
      std::string opt = "--" + name;
      std::replace(opt.begin(), opt.end(), '_', '-');
      std::string hint = did_you_mean(key, "--");
      std::replace(hint.begin(), hint.end(), '_', '-');
      problems.add("unknown option '" + opt + "'" + hint);
      continue;
    }
    std::string problem;
    auto value = parse_text(*spec, text, problem);
    if (value && (problem = check_value(*spec, *value)).empty()) {
      auto prev = std::find_if(layer.begin(), layer.end(), [&](const Entry& e) { return e.spec == spec; });
      if (prev != layer.end() && spec->type == SettingType::string_list) {
        auto& list = std::get<std::vector<std::string>>(prev->effective.value);
        for (auto& item : std::get<std::vector<std::string>>(*value)) list.push_back(std::move(item));
      } else {
        if (prev != layer.end()) layer.erase(prev);
        layer.push_back({spec, {std::move(*value), Origin::cli, option_name(*spec), "set on the command line"}});
      }
    } else {
      problems.add(option_name(*spec) + " " + problem);
    }
  }
  return layer;
}

struct ProfileStep {
  const char* profile;
  const char* key;
  SettingValue value;
  const char* why;
};

const std::vector<ProfileStep>& profile_steps() {
  static const std::vector<ProfileStep> steps = {
      {"ultra_low_overhead", "compile", std::string("off"), "ultra_low_overhead turns off graph capture"},
      {"ultra_low_overhead", "sampler", false, "ultra_low_overhead turns off the sampler thread"},
      {"ultra_low_overhead", "autotune", false, "ultra_low_overhead turns off benchmarking"},
      {"maximum_performance", "compile", std::string("graph"), "maximum_performance turns on graph capture"},
      {"maximum_performance", "fused_optimizer", std::string("on"),
       "maximum_performance turns on the fused optimizer"},
      {"maximum_performance", "tf32", std::string("on"), "maximum_performance turns on TF32"},
      {"maximum_performance", "master_weights", std::string("on"),
       "maximum_performance keeps a bf16 model's fp32 master weights in the fused optimizer"},
      {"auto", "autotune", true, "auto benchmarks the candidates and caches the decision"},
      {"auto", "master_weights", std::string("on"),
       "auto times the bf16 + fused candidates with fp32 master weights in the optimizer"},
  };
  return steps;
}

// The profile name from the highest layer that sets it.
std::optional<Effective> chosen_profile(const std::vector<const Layer*>& highest_first) {
  for (const Layer* layer : highest_first)
    for (auto it = layer->rbegin(); it != layer->rend(); ++it)
      if (it->spec->key == "profile") return it->effective;
  return std::nullopt;
}

}  // namespace

std::string nearest_setting_key(std::string_view key) { return nearest(key, schema_keys()); }
std::string nearest_word(std::string_view word, const std::vector<std::string>& candidates) {
  return nearest(word, candidates);
}

const std::vector<std::string>& component_tables() {
  static const std::vector<std::string> tables = {"train", "bench", "routing"};
  return tables;
}

bool is_component_table(std::string_view key) {
  const auto& tables = component_tables();
  return std::find(tables.begin(), tables.end(), key) != tables.end();
}

Settings::Settings() {
  for (const auto& spec : settings_schema())
    values_[spec.key] = Effective{spec.default_value, Origin::default_value, "built-in", "built-in default"};
}

Settings Settings::resolve(const SettingsInputs& inputs) {
  const Env env = inputs.env ? *inputs.env : read_process_env();
  Problems problems;

  std::optional<std::string> config;
  std::string config_from;
  if (inputs.config_path) {
    config = *inputs.config_path;
    config_from = "--config";
    if (config->empty()) problems.add("--config must name a file, got ''");
  } else if (auto it = env.find("ACCELKIT_CONFIG"); it != env.end() && !it->second.empty()) {
    config = it->second;
    config_from = "ACCELKIT_CONFIG";
  }
  Layer file;
  if (config && !config->empty()) {
    std::error_code ec;
    auto abs = std::filesystem::absolute(*config, ec);
    if (!ec) {
      abs = abs.lexically_normal();
      if (!abs.has_filename() && abs.has_parent_path()) abs = abs.parent_path();  // "dir/" -> "dir"
      config = abs.string();
    }
    file = read_file(*config, config_from, problems);
    for (auto& p : routing_config_problems(*config)) problems.add(std::move(p));
  }
  Layer env_layer = read_env(env, problems);
  Layer cli = read_cli(inputs.cli, problems);
  problems.raise_if_any();

  Settings s;
  if (config && !config->empty()) s.config_file_ = config;
  auto profile = chosen_profile({&cli, &env_layer, &file});
  std::string profile_name = profile ? std::get<std::string>(profile->value) : s.str("profile");
  for (const auto& step : profile_steps())
    if (profile_name == step.profile)
      s.values_[step.key] = Effective{step.value, Origin::profile, "profile " + profile_name, step.why};
  for (const Layer* layer : {&file, &env_layer, &cli})
    for (const auto& entry : *layer) s.values_[entry.spec->key] = entry.effective;
  return s;
}

const Effective& Settings::get(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw std::out_of_range("unknown setting '" + std::string(key) + "'");
  return it->second;
}

namespace {
template <typename T>
const T& typed(const Effective& e, std::string_view key, const char* want) {
  if (auto* v = std::get_if<T>(&e.value)) return *v;
  throw std::logic_error("setting '" + std::string(key) + "' is " + with_article(type_of(e.value)) + ", not " + want);
}
}  // namespace

std::string Settings::str(std::string_view key) const { return typed<std::string>(get(key), key, "a string"); }
bool Settings::flag(std::string_view key) const { return typed<bool>(get(key), key, "a boolean"); }
std::int64_t Settings::integer(std::string_view key) const {
  return typed<std::int64_t>(get(key), key, "an integer");
}
std::vector<std::string> Settings::list(std::string_view key) const {
  return typed<std::vector<std::string>>(get(key), key, "an array of strings");
}

void Settings::set(std::string_view key, SettingValue value, Origin origin, std::string source, std::string why) {
  const SettingSpec* spec = find_spec(key);
  if (!spec) throw SettingsError("unknown setting '" + std::string(key) + "'" + did_you_mean(key));
  if (auto problem = check_value(*spec, value); !problem.empty()) {
    std::string from = std::string(to_string(origin)) + (source.empty() ? "" : " (" + source + ")");
    throw SettingsError("'" + spec->key + "' from " + from + " " + problem);
  }
  values_[spec->key] = Effective{std::move(value), origin, std::move(source), std::move(why)};
}

std::string Settings::origin_of(std::string_view key) const {
  const Effective& e = get(key);
  return e.source.empty() ? to_string(e.origin) : e.source;
}

std::vector<std::pair<std::string, Effective>> Settings::all() const {
  std::vector<std::pair<std::string, Effective>> out;
  for (const auto& spec : settings_schema()) out.emplace_back(spec.key, values_.at(spec.key));
  return out;
}

}  // namespace accelkit
