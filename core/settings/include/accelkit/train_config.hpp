// The [train] table of the settings' config file: what `accelkit train` (apps/train) runs.
//
//   [train]
//   steps = 1000            # optimizer steps in all (a resumed run continues up to it)
//   batch_size = 64         # samples per step (absent: the batch_size setting if > 0, else 64)
//   micro_batches = 1       # gradient accumulation: batch_size is split into this many
//   width = 256             # input and hidden width of teacher and student
//   depth = 3               # hidden layers (Linear + tanh)
//   outputs = 16            # output width
//   lr = 1e-3               # AdamW learning rate
//   weight_decay = 0.0      # AdamW weight decay
//   seed = 0                # teacher, student init and the data stream
//   log_every = 10          # a log line (or JSON record) every N steps
//   checkpoint_dir = "checkpoints"  # relative to the config file's directory; "" = none
//   checkpoint_every = 100  # 0 = only at the end and on interruption
//   keep_last = 3           # checkpoints kept; 0 = all
//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accelkit/settings.hpp"

namespace accelkit {

struct TrainConfig {
  std::int64_t steps = 1000;
  std::int64_t batch_size = 64;
  std::int64_t micro_batches = 1;
  std::int64_t width = 256;
  std::int64_t depth = 3;
  std::int64_t outputs = 16;
  double lr = 1e-3;
  double weight_decay = 0.0;
  std::int64_t seed = 0;
  std::int64_t log_every = 10;
  std::string checkpoint_dir = "checkpoints";  // absolute after loading; "" = no checkpoints
  std::int64_t checkpoint_every = 100;
  std::int64_t keep_last = 3;
  // batch_size came from the user ([train] batch_size, the batch_size setting, --batch), not
  // the default: with batch_auto it is the effective batch to reach.
  bool batch_size_set = false;
  // --batch auto[:MAX]: the trainer asks the batch-size finder (Runtime::find_batch_size) for
  // the largest batch that fits, at most batch_max (0 = the finder's default); with
  // batch_size_set, the batch and the accumulation steps (micro_batches) that reach batch_size.
  bool batch_auto = false;
  std::int64_t batch_max = 0;
};

// The [train] settings (settings.hpp's "train.*" keys, file only) as values: batch_size is
// [train]'s when the file sets it, else the batch_size setting when > 0, else 64; a relative
// checkpoint_dir is resolved against the config file's directory (the working directory
// without a config file).
TrainConfig train_config_from(const Settings& settings);

// What is wrong with [train]'s values together ("" when nothing): micro_batches must divide
// the batch. Settings::resolve() refuses such settings with this message.
std::string train_settings_problem(const Config& config);

// The [train] table of a TOML file, resolved as Settings::resolve() would with that file and
// no environment (batch_size_setting > 0: the batch_size setting). Throws SettingsError.
TrainConfig read_train_config(const std::string& toml_path, std::int64_t batch_size_setting = 0);

}  // namespace accelkit
