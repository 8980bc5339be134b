// Observe, then switch: the program's own first training steps pick what its later steps run
// with. Runtime::autocast() hands each training step (a top-level autocast scope entered with
// gradients on) one candidate in turn - the negotiated precision plan, fp32, fewer CPU threads -
// a turn of a few steps each, the last one timed from its entry to the next; once every
// candidate has its samples, the fastest (by median) is kept for the rest of the run and cached
// for the next. No lambdas, no separate batch: the program's own loop is the trial.
//
// What it may switch between steps is only what leaves the training itself unchanged in kind:
// autocast on or off and the intra-op thread count. The weights, the optimizer and its state
// are the program's throughout. The steps it observes differ only in rounding (some in the
// plan's dtype, some in fp32), which is why it is off where the user fixed the precision,
// where the auto-tuner already decided, for a graph-captured step (Runtime::capture_step on a
// device that captures: a replay runs the kernels recorded at capture), and under the
// step_tuning = off setting.
//
// On a device that queues work (CUDA), a step's interval is measured on the host: a program
// that reads its loss each step (loss.item()) waits for the device there, so the interval is
// the device's time; one that never waits times how fast the host queues work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

namespace accelkit {

// Whose operator kernels a step runs where the plan has the plugin's own (PrecisionPlan::kernels).
enum class StepKernels : std::uint8_t {
  none,      // the plan has none: LibTorch's
  plugin,    // the plan's: the plugin's for the inputs they take
  libtorch,  // LibTorch's only, though the plan has the plugin's
};

// What one training step runs with.
struct StepConfig {
  bool autocast = false;
  at::ScalarType dtype = at::kFloat;  // the autocast dtype when autocast is on
  int threads = 0;                    // intra-op threads; 0 = as they are
  StepKernels kernels = StepKernels::none;
  // "bf16 autocast, 2 threads", "fp32, 1 thread", "fp32, 2 threads, LibTorch's kernels".
  std::string label() const;
  bool operator==(const StepConfig& o) const {
    return autocast == o.autocast && (!autocast || dtype == o.dtype) && threads == o.threads && kernels == o.kernels;
  }
};

struct StepTuningStatus {
  enum class State { off, observing, decided };
  State state = State::off;
  std::vector<StepConfig> candidates;       // candidates[0] is the negotiated plan
  std::vector<std::vector<double>> samples;  // ms per observed step, per candidate
  std::vector<double> median_ms;            // per candidate, once decided from observation
  std::size_t chosen = 0;
  std::string source;  // "observed on the program's training steps 1-28", "step-tuning cache F"
  std::string why;     // why off, or why the chosen one
  std::int64_t steps_seen = 0;  // training steps entered so far while observing
};

// The ranks of a data-parallel run decide together (Runtime::join_data_parallel sets it): a
// rank whose observation is complete publishes its medians, and once every rank has, each
// decides on all of them the same way (a candidate's median is the mean of the ranks'), so all
// keep one configuration. Neither call may block: a rank that finished observing first runs the
// plan (untimed) until the last one has published - a step or two, since the ranks' steps
// wait for each other. The observation itself follows the same schedule on every rank (it
// depends only on the sequence of scopes, never on the times).
struct StepAgreement {
  int world_size = 1;
  // This rank's observation for tuner `generation` (a count of the tuners made, the same on
  // every rank), once.
  std::function<void(int generation, const std::string& payload)> publish;
  // Every rank's payload in rank order once all have published; nullopt until then; an empty
  // vector where the run's process group is gone (this rank decides alone).
  std::function<std::optional<std::vector<std::string>>(int generation)> poll;
  // Rank 0's `text` under `key` on every rank, each rank giving its own (blocking, within the
  // run's dist_timeout): for a choice every rank must make alike, such as the AdamW
  // implementation. `key` is used once per run. Empty: this rank's own.
  std::function<std::string(const std::string& key, const std::string& text)> rank0;
  explicit operator bool() const { return world_size > 1 && publish && poll; }
};

// The observing state machine (pure: the clock is injected; tested directly).
class StepTuner {
 public:
  struct Options {
    int warmup_rounds = 1;   // rounds (one turn per candidate) not timed: allocator, caches
    int rounds = 5;          // timed steps per candidate
    // Consecutive steps per candidate's turn, only the last one timed.
    int steps_per_turn = 2;
    // Untimed steps more where a turn changes the thread count: an OpenMP pool grown back to
    // more threads runs the next few steps up to 3x slower (LibTorch 1.13's libgomp). Rounds
    // group the candidates by thread count, alternating the groups' order, so a round changes
    // it once.
    int settle_steps = 4;
    double margin = 0.03;    // another candidate must beat the plan's median by this fraction
    int give_up_factor = 4;  // decide for the plan after (warmup + rounds) * this many rounds
  };
  using Clock = std::function<double()>;  // monotonic milliseconds

  StepTuner(std::vector<StepConfig> candidates, Options options, Clock clock = {});

  // A top-level autocast scope begins. `training`: gradients are on (a training step);
  // anything else (evaluation under NoGradGuard) runs candidate 0 and breaks the interval
  // being timed. Returns the configuration this scope runs with.
  const StepConfig& enter(bool training);

  // Takes a decision made earlier (the cache): index into candidates.
  void adopt(std::size_t index, std::string source, std::string why);

  // A data-parallel run's agreement (above), for the tuner the ranks count as `generation`.
  void set_agreement(StepAgreement agreement, int generation);

  bool decided() const noexcept { return status_.state == StepTuningStatus::State::decided; }
  // True once, right after the observation decided (the caller records and caches it).
  bool take_new_decision() noexcept;
  const StepTuningStatus& status() const noexcept { return status_; }

 private:
  void start_round();
  void end_turn();
  void decide();
  // Decides on every rank's observation (the agreement's payloads).
  void decide_together(const std::vector<std::string>& payloads);
  void decide_on(const std::vector<double>& medians, const std::vector<bool>& timed, const std::string& pooled);
  // The decision: `chosen`, why, observed by this rank alone or by every rank (`pooled`).
  void settle(std::size_t chosen, std::string why, bool pooled);
  std::string payload() const;
  Options options_;
  StepAgreement agreement_;
  int generation_ = 0;
  bool published_ = false;
  std::int64_t observed_steps_ = 0;  // training steps observed when this rank published
  Clock clock_;
  StepTuningStatus status_;
  std::vector<std::size_t> order_;  // this round's candidate order (shuffled per round)
  std::size_t pos_ = 0;             // position in order_
  int turn_step_ = 0;               // steps taken in the current candidate's turn
  int turn_len_ = 0;                // steps in the current turn
  int last_threads_ = 0;            // the thread count the last step ran with
  std::int64_t round_ = 0;
  bool pending_ = false;            // a timed interval is open
  std::size_t pending_index_ = 0;
  bool pending_timed_ = false;
  double pending_start_ = 0;
  bool new_decision_ = false;
  std::mt19937 shuffle_{0x5eedu};   // our own: the program's random streams stay untouched
};

}  // namespace accelkit
