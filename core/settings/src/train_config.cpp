// The [train] section of the settings, as the values `accelkit train` runs with.
#include "accelkit/train_config.hpp"

#include <filesystem>

namespace accelkit {

namespace fs = std::filesystem;

namespace {

// The samples per step [train] asks for, and where that came from.
std::pair<std::int64_t, std::string> effective_batch(const Config& c) {
  const auto& train = c.train.batch_size;
  if (!train.user_set() && *c.batch_size > 0) return {*c.batch_size, "batch_size (from " + c.batch_size.from() + ")"};
  return {*train, "batch_size"};
}

}  // namespace

std::string train_settings_problem(const Config& c) {
  const auto [batch, what] = effective_batch(c);
  if (batch % *c.train.micro_batches == 0) return {};
  return "'train.micro_batches' in " + c.train.micro_batches.from() + " must divide " + what + " (" +
         std::to_string(batch) + "), got " + std::to_string(*c.train.micro_batches);
}

TrainConfig train_config_from(const Settings& settings) {
  const Config& c = settings.config();
  if (std::string problem = train_settings_problem(c); !problem.empty()) throw SettingsError(problem);
  const TrainSettings& t = c.train;
  TrainConfig out;
  out.steps = *t.steps;
  out.batch_size = effective_batch(c).first;
  out.batch_size_set = t.batch_size.user_set() || *c.batch_size > 0;
  out.micro_batches = *t.micro_batches;
  out.width = *t.width;
  out.depth = *t.depth;
  out.outputs = *t.outputs;
  out.lr = *t.lr;
  out.weight_decay = *t.weight_decay;
  out.seed = *t.seed;
  out.log_every = *t.log_every;
  out.checkpoint_every = *t.checkpoint_every;
  out.keep_last = *t.keep_last;
  out.checkpoint_dir = *t.checkpoint_dir;
  if (!out.checkpoint_dir.empty()) {
    fs::path dir(out.checkpoint_dir);
    if (dir.is_relative())
      dir = (settings.config_file() ? fs::path(*settings.config_file()).parent_path() : fs::current_path()) / dir;
    out.checkpoint_dir = dir.lexically_normal().string();
  }
  return out;
}

TrainConfig read_train_config(const std::string& toml_path, std::int64_t batch_size_setting) {
  SettingsInputs in;
  in.config_path = toml_path;
  in.env = std::map<std::string, std::string>{};
  if (batch_size_setting > 0) in.cli.emplace_back("batch_size", std::to_string(batch_size_setting));
  return train_config_from(Settings::resolve(in));
}

}  // namespace accelkit
