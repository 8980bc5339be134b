// The [train] table: schema, validation with file:line:column, defaults.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <sstream>

#include <toml++/toml.h>

#include "config_file.hpp"
#include "toml_text.hpp"
#include "accelkit/train_config.hpp"

namespace accelkit {

namespace fs = std::filesystem;

namespace {

enum class Kind { integer, number, string };

struct Key {
  const char* name;
  Kind kind;
  double min;  // inclusive; numbers: exclusive when min_exclusive
  bool min_exclusive;
  std::function<void(TrainConfig&, const toml::node&)> set;
};

template <typename T>
T get(const toml::node& n) {
  if constexpr (std::is_same_v<T, std::int64_t>) return n.as_integer()->get();
  else if constexpr (std::is_same_v<T, double>)
    return n.as_integer() ? static_cast<double>(n.as_integer()->get()) : n.as_floating_point()->get();
  else return n.as_string()->get();
}

#define ACCELKIT_KEY(name, kind, min, excl, type) \
  Key { #name, kind, min, excl, [](TrainConfig& c, const toml::node& n) { c.name = get<type>(n); } }

const std::vector<Key>& keys() {
  static const std::vector<Key> k = {
      ACCELKIT_KEY(steps, Kind::integer, 1, false, std::int64_t),
      ACCELKIT_KEY(batch_size, Kind::integer, 1, false, std::int64_t),
      ACCELKIT_KEY(micro_batches, Kind::integer, 1, false, std::int64_t),
      ACCELKIT_KEY(width, Kind::integer, 1, false, std::int64_t),
      ACCELKIT_KEY(depth, Kind::integer, 1, false, std::int64_t),
      ACCELKIT_KEY(outputs, Kind::integer, 1, false, std::int64_t),
      ACCELKIT_KEY(lr, Kind::number, 0, true, double),
      ACCELKIT_KEY(weight_decay, Kind::number, 0, false, double),
      ACCELKIT_KEY(seed, Kind::integer, 0, false, std::int64_t),
      ACCELKIT_KEY(log_every, Kind::integer, 1, false, std::int64_t),
      ACCELKIT_KEY(checkpoint_dir, Kind::string, 0, false, std::string),
      ACCELKIT_KEY(checkpoint_every, Kind::integer, 0, false, std::int64_t),
      ACCELKIT_KEY(keep_last, Kind::integer, 0, false, std::int64_t),
  };
  return k;
}

#undef ACCELKIT_KEY



std::string format_number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The problem with `node` as a value of `key`, or "".
std::string check(const Key& key, const toml::node& node) {
  switch (key.kind) {
    case Kind::integer: {
      if (!node.is_integer()) return std::string("must be an integer, got ") + toml_type_name(node.type());
      std::int64_t v = node.as_integer()->get();
      if (static_cast<double>(v) < key.min)
        return "must be at least " + std::to_string(static_cast<std::int64_t>(key.min)) + ", got " + std::to_string(v);
      return {};
    }
    case Kind::number: {
      if (!node.is_integer() && !node.is_floating_point())
        return std::string("must be a number, got ") + toml_type_name(node.type());
      double v = get<double>(node);
      if (!std::isfinite(v)) return "must be a finite number, got " + format_number(v);
      if (key.min_exclusive ? v <= key.min : v < key.min)
        return std::string("must be ") + (key.min_exclusive ? "greater than " : "at least ") + format_number(key.min) +
               ", got " + format_number(v);
      return {};
    }
    case Kind::string:
      if (!node.is_string()) return std::string("must be a string, got ") + toml_type_name(node.type());
      return {};
  }
  return {};
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
  return out;
}

}  // namespace

const std::vector<std::string>& train_config_keys() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& k : keys()) n.emplace_back(k.name);
    return n;
  }();
  return names;
}

TrainConfig read_train_config(const std::string& toml_path, std::int64_t default_batch_size) {
  TrainConfig config;
  if (default_batch_size > 0) config.batch_size = default_batch_size;
  const config_detail::ParsedConfig parsed = config_detail::parse_config(toml_path);
  if (!parsed.read_error.empty()) throw SettingsError("cannot read config file " + toml_path + ": " + parsed.read_error);
  if (!parsed.root) throw SettingsError(parsed.parse_error);
  const toml::table& root = *parsed.root;

  std::vector<std::string> problems;
  std::optional<std::string> batch_at, micro_at;
  if (const toml::node* node = root.get("train")) {
    const toml::table* table = node->as_table();
    if (!table) throw SettingsError("'train' in " + toml_position(toml_path, node->source()) + " must be a table ([train])");
    // File order, so that problems read top to bottom.
    const auto items = config_detail::in_file_order(*table);
    for (const auto& [k, n] : items) {
      const std::string name(k->str());
      const std::string at = toml_position(toml_path, k->source());
      auto spec = std::find_if(keys().begin(), keys().end(), [&](const Key& key) { return name == key.name; });
      if (spec == keys().end()) {
        std::string msg = "unknown [train] key '" + name + "' in " + at;
        if (auto guess = nearest_word(name, train_config_keys()); !guess.empty())
          msg += "; did you mean '" + guess + "'?";
        else
          msg += " (valid keys: " + [] {
            std::string all;
            for (const auto& key : train_config_keys()) all += (all.empty() ? "" : ", ") + key;
            return all;
          }() + ")";
        problems.push_back(std::move(msg));
        continue;
      }
      if (auto problem = check(*spec, *n); !problem.empty()) {
        problems.push_back("'train." + name + "' in " + at + " " + problem);
        continue;
      }
      spec->set(config, *n);
      if (name == "batch_size") batch_at = at;
      if (name == "micro_batches") micro_at = at;
    }
  }
  if (problems.empty() && config.batch_size % config.micro_batches != 0)
    problems.push_back("'train.micro_batches' in " + micro_at.value_or(batch_at.value_or(toml_path)) + " must divide batch_size (" +
                       std::to_string(config.batch_size) + "), got " + std::to_string(config.micro_batches));
  if (!problems.empty()) throw SettingsError(join_lines(problems));

  if (!config.checkpoint_dir.empty()) {
    fs::path dir(config.checkpoint_dir);
    if (dir.is_relative()) dir = fs::absolute(toml_path).parent_path() / dir;
    config.checkpoint_dir = dir.lexically_normal().string();
  }
  return config;
}

TrainConfig train_config_from(const Settings& settings) {
  const std::int64_t batch = settings.integer("batch_size");
  if (settings.config_file()) return read_train_config(*settings.config_file(), batch);
  TrainConfig config;
  if (batch > 0) config.batch_size = batch;
  if (config.batch_size % config.micro_batches != 0)
    throw SettingsError("batch_size " + std::to_string(config.batch_size) + " is not divisible by micro_batches " +
                        std::to_string(config.micro_batches));
  config.checkpoint_dir = (fs::current_path() / config.checkpoint_dir).lexically_normal().string();
  return config;
}

}  // namespace accelkit
