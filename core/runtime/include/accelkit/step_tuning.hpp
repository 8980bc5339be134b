// Observe, then switch: the program's own first training steps pick what its later steps run
// with. Runtime::autocast() hands each training step (a top-level autocast scope entered with
// gradients on) one candidate in turn - the negotiated precision plan, fp32, fewer CPU threads -
// a turn of a few steps each, the last one timed from its entry to the next; once every
// candidate has its samples, the fastest (by median) is kept from then on (revisited: below)
// and cached for the next run. No lambdas, no separate batch: the program's own loop is the trial.
//
// What it may switch between steps is only what leaves the training itself unchanged in kind:
// autocast on or off, the intra-op thread count, and the memory layout of the convolution
// weights of a model given to Runtime::prepare (channels-last or as made: their values never
// change; weight_layout.hpp). The weights, the optimizer and its state are the program's
// throughout. The steps it observes differ only in rounding (some in the
// plan's dtype, some in fp32), which is why it is off where the user fixed the precision,
// where the auto-tuner already decided, for a graph-captured step (Runtime::capture_step on a
// device that captures: a replay runs the kernels recorded at capture), and under the
// step_tuning = off setting.
//
// A decision is not trusted forever (the step_retune setting, on by default): from then on the
// tuner watches, once a window (watch_steps training steps and at least watch_ms of the
// program's own step time: the median interval times the intervals, so work the program does
// between its steps does not stretch a window), the median interval between the training steps
// and how many cores other processes keep busy; where either moves away from what it was when
// the decision was taken (load_change cores, time_change of the step; a load that falls to half
// what it was by at least load_fall_min cores counts too: a choice made while others kept half a
// core busy is not trusted once they stop) for sustain_windows windows in a row, it re-times on the program's next steps (revisit_rounds each) the standing
// choice and the candidates the change can favour, and switches where one beats the standing
// one by revisit_margin:
//   - other processes' load fell: the candidates with more threads than the standing choice;
//   - it rose: those with fewer;
//   - only the step's time moved, the load as it was (it is read: on a CPU): nothing the load
//     decided has changed, so nothing is re-timed; the new time becomes the reference and the
//     watch says so (take_watch_note). The same where the load moved but no candidate runs
//     more (fewer) threads than the standing one: the new load becomes its reference.
//   - where the load is not read (not a CPU), a moved time re-times every candidate.
// A re-observation's reference is what it found; the next may begin only after gap_windows
// windows, doubled by each one (up to max_gap_windows), so a noisy or bursty machine does not
// make it flap. Not in a data-parallel run (its ranks decide together once).
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
  // The model's convolution weights channels-last (the plan and fp32 at the most threads so,
  // offered where Runtime::prepare was given a model with 2-D convolutions and, with
  // channels_last = auto, its first step view()ed nothing that layout fails); false: as made.
  bool channels_last = false;
  // "bf16 autocast, 2 threads", "fp32, 1 thread", "fp32, 2 threads, LibTorch's kernels",
  // "bf16 autocast, 2 threads, channels-last".
  std::string label() const;
  bool operator==(const StepConfig& o) const {
    return autocast == o.autocast && (!autocast || dtype == o.dtype) && threads == o.threads && kernels == o.kernels &&
           channels_last == o.channels_last;
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
  // Revisiting the decision (above). While it re-observes, state stays decided and `chosen` is
  // the standing choice (the steps run the candidates in turn).
  bool reobserving = false;
  std::int64_t redecisions = 0;  // re-observations finished (each one a decision recorded again)
  // Why the last re-observation began, what the decision had and what it chose; "" before one.
  std::string last_revisit;
  // What the watch last found that re-timed nothing (a sustained change no other candidate can
  // gain from: its figures became the references); "" before one.
  std::string last_watch;
  // Why the decision is not (any longer) revisited; "" while it is watched.
  std::string no_revisit;
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
    // In the first observation (not a data-parallel run's, whose ranks keep one schedule), a
    // candidate other than the plan, with fewer threads than the fastest candidate, whose fastest
    // timed step, after at least race_after, is race_factor times the fastest candidate's median
    // or slower is timed no more: a program does not pay all its rounds for a candidate that
    // cannot win (0: off). A revisit re-times it when other processes' load rises.
    double race_factor = 1.5;
    int race_after = 2;
    int give_up_factor = 4;  // decide for the plan after (warmup + rounds) * this many rounds
    // Revisiting the decision (above).
    bool revisit = true;
    double watch_ms = 500;         // a watch window holds at least this much of the steps' own time...
    int watch_steps = 5;           // ...and this many intervals between training steps
    double load_change = 0.5;      // cores of other processes' load away from the decision's
    double load_fall_min = 0.25;   // ...or a fall to half the decision's load, by at least this
    double time_change = 0.25;     // the window's median step away from the reference, a fraction
    int sustain_windows = 3;       // windows in a row a change must last
    int gap_windows = 10;          // windows after a re-observation before the next may begin
    int max_gap_windows = 320;     // the gap doubles with each re-observation up to this
    int revisit_rounds = 3;        // timed steps per candidate in a re-observation (no warm-up)
    double revisit_margin = 0.05;  // another must beat the standing choice's median by this
  };
  using Clock = std::function<double()>;  // monotonic milliseconds
  // Cores other processes kept busy since the previous call (< 0: unknown). Called once per
  // watch window and at an observation's start and end, never per step.
  using Load = std::function<double()>;

  StepTuner(std::vector<StepConfig> candidates, Options options, Clock clock = {}, Load load = {});

  // A top-level autocast scope begins. `training`: gradients are on (a training step);
  // anything else (evaluation under NoGradGuard) runs candidate 0 and breaks the interval
  // being timed. Returns the configuration this scope runs with.
  const StepConfig& enter(bool training);

  // Takes a decision made earlier (the cache): index into candidates; `load`: the cores other
  // processes kept busy when it was observed (< 0: unknown, the first watch window's is taken).
  void adopt(std::size_t index, std::string source, std::string why, double load = -1);

  // The decision stands from here: no (further) re-observation; one under way ends, keeping the
  // standing choice.
  void stop_revisiting(std::string why);
  // A note added to the observation's why ("observing the program's first training steps
  // (candidates; note): step 12 of about 72").
  void note(std::string text);
  // Other processes' load (cores) over the observation that took the standing decision; < 0
  // unknown.
  double decision_load() const noexcept { return decision_load_; }
  // Whether the candidates are being timed: the first observation or a re-observation.
  bool observing() const noexcept { return !decided() || status_.reobserving; }
  // Bumped whenever the status changes other than by a step's progress (a decision, a cached
  // one adopted, a re-observation begun or ended).
  std::uint64_t changes() const noexcept { return changes_; }

  // A data-parallel run's agreement (above), for the tuner the ranks count as `generation`.
  void set_agreement(StepAgreement agreement, int generation);

  bool decided() const noexcept { return status_.state == StepTuningStatus::State::decided; }
  // True once, right after the observation decided (the caller records and caches it).
  bool take_new_decision() noexcept;
  // What the watch found that changed no decision (a new reference, and why nothing was
  // re-timed), once; "" when nothing new. Bumps changes().
  std::string take_watch_note();
  const StepTuningStatus& status() const noexcept { return status_; }

 private:
  void start_round();
  void end_turn();
  // As a round of the first observation begins: leaves out the candidates that cannot win
  // (race_factor); true where it left any.
  bool race();
  void decide();
  // Decides on every rank's observation (the agreement's payloads).
  void decide_together(const std::vector<std::string>& payloads);
  void decide_on(const std::vector<double>& medians, const std::vector<bool>& timed, const std::string& pooled);
  // The decision: `chosen`, why, observed by this rank alone or by every rank (`pooled`).
  void settle(std::size_t chosen, std::string why, bool pooled);
  std::string payload() const;
  std::string observing_why() const;
  std::int64_t expected_steps(int warmup, int rounds) const;
  // Revisiting (step_revisit.cpp): a training step while decided; a window's end; the
  // re-observation's start and end.
  const StepConfig& finish_observation();
  void reset_watch();
  void reset_drift();  // no window away from the references
  // The thread counts of the candidates the observation under way times, in order of first.
  std::vector<int> thread_groups() const;
  void watch(bool training);
  void close_window(double now, double ms);
  // The candidates a change of other processes' load in `direction` (< 0 fell, > 0 rose, 0:
  // unknown) can favour, the standing choice among them.
  std::vector<bool> favoured(int direction) const;
  // How other processes' load moved from the decision's: 1 rose, -1 fell, 0 not far enough.
  int load_moved(double load) const;
  // A sustained change that leaves nothing to re-time: its figures become the references.
  void retake_reference(double load, double ms, const std::string& reason, int direction);
  void begin_reobservation(const std::string& reason, std::vector<bool> which);
  void redecide();
  std::string revisit_reason(double load, double ms) const;
  Options options_;
  int obs_warmup_ = 0;   // the observation under way: untimed rounds
  int obs_rounds_ = 0;   // timed steps per candidate
  Load load_;
  std::string note_;
  std::uint64_t changes_ = 0;
  std::int64_t training_steps_ = 0;  // every training step entered, all states
  std::int64_t obs_first_step_ = 0;  // the training step a re-observation began at
  // The watch: the reference (< 0 / 0: the first window's), the open window, the drift.
  double decision_load_ = -1;
  double ref_ms_ = 0;
  std::vector<double> ref_intervals_;  // the first windows', until ref_ms_ is taken
  double window_start_ = 0;
  bool window_open_ = false;
  bool have_last_step_ = false;
  double last_step_at_ = 0;
  std::vector<double> intervals_;
  int next_check_ = 0;             // the interval count at which the window's median is taken next
  int drift_ = 0;                  // windows in a row away from the reference
  double drift_load_ = 0;          // their sums, for the reason
  double drift_ms_ = 0;
  double drift_wall_ = 0;
  int windows_since_ = 0;          // windows since the standing decision
  int gap_ = 0;                    // windows that must pass before a re-observation
  std::string standing_why_;       // the standing decision's why, while it re-observes
  std::string reason_;             // why the re-observation under way began
  std::vector<bool> active_;       // the candidates the observation under way times
  std::string raced_why_;          // the candidates race() left out of the first observation, with their figures
  bool watch_note_new_ = false;    // last_watch not yet taken by take_watch_note
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
