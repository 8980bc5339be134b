// The example trainer behind `accelkit train`: an MLP student learns a fixed random teacher
// network (a synthetic task that is learnable and needs no data set) on the Runtime's device,
// precision, optimizer and loss scaler, with atomic checkpoints and exact resume.
//
// Configuration: the [train] table of the settings' config file.
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
// Exactness: the batch of step k is drawn from a generator seeded by (seed, k) on the CPU and
// a checkpoint holds the model, the optimizer state and the loss scaler, so a run resumed from
// step k repeats the uninterrupted run's losses bit for bit (same device, threads and
// precision).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/types.h>

#include "accelkit/settings.hpp"

namespace accelkit {

class Runtime;

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
};

// The [train] keys, in the order above.
const std::vector<std::string>& train_config_keys();

// The [train] table of a TOML file, validated like the settings: every problem is reported
// (unknown key with its nearest valid key, wrong type with the expected type, bounds, all with
// file:line:column) in one SettingsError. A file without [train] gives the defaults. Relative
// checkpoint_dir is resolved against the file's directory.
TrainConfig read_train_config(const std::string& toml_path, std::int64_t default_batch_size = 64);

// From the settings' config file (the defaults when there is none; checkpoint_dir is then
// relative to the working directory). batch_size defaults to the batch_size setting when > 0.
TrainConfig train_config_from(const Settings& settings);

// A refused run: existing checkpoints without resume, an incompatible checkpoint, no valid
// checkpoint to resume from, a diverged loss. what() says what to do.
class TrainError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainProgress {
  std::int64_t step = 0;   // steps completed
  std::int64_t steps = 0;  // total
  std::int64_t first_step = 0;        // where this run began
  std::optional<double> loss;         // the last step's loss; set on log steps only
  double steps_per_s = 0;             // this run's average after its first step
  double eta_s = 0;
  double elapsed_s = 0;
  bool log = false;                   // a log step (every log_every, and the last)
};

struct TrainResult;

struct TrainOptions {
  // Continue from the newest valid checkpoint in checkpoint_dir (corrupt ones are skipped
  // with a warning). With none present: start fresh with a warning. With some present but
  // none valid: TrainError listing each reason. Without resume, existing checkpoints are a
  // TrainError (nothing is overwritten).
  bool resume = false;
  // Polled after every step; when set, the run saves a checkpoint and returns interrupted.
  const std::atomic<bool>* stop = nullptr;
  // Once before the first step, with what the result knows by then (start_step,
  // resumed_from, skipped, warnings, optimizer, precision).
  std::function<void(const TrainResult&)> on_start;
  // After every step (loss only on log steps, so that a GPU is not synchronised each step).
  std::function<void(const TrainProgress&)> on_step;
};

struct SkippedCheckpoint {
  std::string path;
  std::string reason;
};

struct TrainResult {
  std::int64_t start_step = 0;  // 0, or the step of the checkpoint resumed from
  std::int64_t end_step = 0;    // steps completed on return
  bool interrupted = false;
  std::optional<std::string> resumed_from;
  std::vector<SkippedCheckpoint> skipped;  // corrupt checkpoints passed over while resuming
  std::vector<std::string> saved;          // checkpoints written, in order
  std::vector<std::string> pruned;         // checkpoints deleted for keep_last
  std::vector<std::string> warnings;       // also logged
  std::vector<double> losses;              // loss of steps start_step+1 .. end_step
  std::string optimizer;                   // implementation, e.g. "fused AdamW (avx512, 2 threads)"
  std::string precision;                   // "bf16 autocast", "fp16 autocast + loss scaling", "fp32"
};

class Trainer {
 public:
  // Builds teacher and student on the runtime's device. The runtime must outlive the trainer.
  Trainer(Runtime& runtime, TrainConfig config);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  const TrainConfig& config() const noexcept;
  // Trains up to config().steps; throws TrainError, CheckpointError, SettingsError.
  TrainResult run(const TrainOptions& options = {});
  // The student's parameters (for inspection and tests).
  std::vector<at::Tensor> parameters() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace accelkit
