// The example trainer behind `accelkit train`: an MLP student learns a fixed random teacher
// network (a synthetic task that is learnable and needs no data set) on the Runtime's device,
// precision, optimizer and loss scaler, with atomic checkpoints and exact resume.
//
// Configuration: the [train] table of the settings' config file (train_config.hpp).
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

#include "accelkit/batch_finder.hpp"
#include "accelkit/guard.hpp"
#include "accelkit/train_config.hpp"

namespace accelkit {

class Runtime;
namespace dist { class ProcessGroup; }

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
  double step_ms = 0;                 // this step's wall time (a GPU's queue is not drained)
  std::optional<std::uint64_t> memory_bytes;  // device memory in use after the step, where reported
  std::optional<double> temperature_c;        // the guard's latest sample
  std::optional<double> power_w;
  std::vector<GuardEvent> guard_events;       // raised after this step
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
  // Checked after every step (Guard::check): it may pause the run, or stop it (a checkpoint is
  // saved, the result says guard_stopped). nullptr: no guard.
  Guard* guard = nullptr;
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
  bool guard_stopped = false;  // the guard stopped the run (interrupted is set too)
  // In a data-parallel run, the ranks whose stop every rank followed (each rank stops after the
  // same step): interrupted (a signal) and stopped by their thermal guard; this rank included.
  std::vector<int> interrupted_ranks;
  std::vector<int> guard_stopped_ranks;
  std::optional<std::string> resumed_from;
  std::vector<SkippedCheckpoint> skipped;  // corrupt checkpoints passed over while resuming
  std::vector<std::string> saved;          // checkpoints written, in order
  std::vector<std::string> pruned;         // checkpoints deleted for keep_last
  std::vector<std::string> warnings;       // also logged
  std::vector<double> losses;              // loss of steps start_step+1 .. end_step
  std::string optimizer;                   // implementation, e.g. "fused AdamW (avx512, 2 threads)"
  std::string precision;                   // "bf16 autocast", "fp16 autocast + loss scaling", "fp32"
  // The input pipeline (accelkit::Prefetcher): batches kept ready (the prefetch setting), the
  // time the steps waited for their input and the time producing it took, in all (ms).
  int prefetch = 0;
  double data_wait_ms = 0;
  double data_produce_ms = 0;
  double train_ms = 0;  // the run's steps, wall time
  // The run directory's (checkpoint_dir's) metrics.jsonl, every step of every segment of the
  // run (run_metrics.hpp), and report.html made from it at the end; "" without a run directory
  // or when they could not be written (a warning says why).
  std::string metrics_path;
  std::string report_path;
};

class Trainer {
 public:
  // Builds teacher and student on the runtime's device. The runtime must outlive the trainer.
  // With config.batch_auto the batch-size finder runs here (on_batch_trial after each of its
  // trial steps), before anything is written: BatchDoesNotFitError when not even one sample
  // fits.
  // `group` (dist::init): a data-parallel run, each rank training on its shard of every
  // batch (batch_size is the global batch); rank 0 alone writes checkpoints, metrics and the
  // report, every rank resumes from them (at any world size). Null or world size 1: alone.
  Trainer(Runtime& runtime, TrainConfig config, std::function<void(const BatchTrial&)> on_batch_trial = {},
          std::shared_ptr<dist::ProcessGroup> group = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // The config trained with: batch_size and micro_batches are the finder's with batch_auto.
  const TrainConfig& config() const noexcept;
  // The batch-size finder's decision (batch_auto), else nullopt.
  const std::optional<BatchDecision>& batch_decision() const noexcept;
  // Trains up to config().steps; throws TrainError, CheckpointError, SettingsError.
  TrainResult run(const TrainOptions& options = {});
  // The student's parameters (for inspection and tests).
  std::vector<at::Tensor> parameters() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace accelkit
