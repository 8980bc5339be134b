// The batch-size finder: how large a batch this device can train this model with.
//
// Runtime::find_batch_size(problem, options) runs real training steps (forward, loss, backward,
// the AdamW make_adamw gives) and reads the device's memory through its plugin:
//   - where the device counts its allocator (a GPU): the batch grows (x2 from `start`) until a
//     step runs out of memory or its peak passes the budget, then a binary search between the
//     last batch that fitted and the first that did not (to within 1/16 of it). An
//     out-of-memory error (c10::OutOfMemoryError, or LibTorch's "out of memory" text) is a
//     trial that did not fit: the allocator's cache is emptied (Device::empty_cache()) and the
//     search goes on.
//   - on the CPU (the process's memory): running out of memory would meet the kernel's OOM
//     killer, so only small batches run before the answer. The step's memory is the tensor
//     bytes it allocates (LibTorch's memory reporting: exact, unlike the resident set, which
//     misses freed memory glibc reuses); forward+backward and the optimizer's step are fitted
//     as two lines in the batch (at small batches the optimizer's state is the peak and hides
//     how fast activations grow), the largest batch under both computed, and one step at it
//     confirms it (an extrapolation that fell short shrinks it by what it missed; the budget's
//     margin absorbs the overshoot). A model whose gradients and AdamW moments alone pass the
//     budget is refused before any step. The step's time bounds the answer too: a CPU has
//     memory for batches whose step runs for minutes, and a larger batch there gains no
//     throughput, only time per step. The trials' forward+backward times (the part of a step
//     that grows with the batch) are fitted as a line in the batch, and a batch whose step
//     would take longer than options.max_step_seconds (the `batch_step_limit` setting,
//     default 2 s) is not an answer; the decision says which bound decided.
// The budget is the memory available when the search starts less the `memory_margin` setting
// (percent of the device's total, default 10), or less when options.memory_budget says so.
// Trials leave no trace: the model's parameters, buffers and LibTorch's CPU random state are
// put back after the search.
//
// With a target effective batch, the answer is a batch and the gradient-accumulation steps
// that reach it: accumulation = ceil(target / largest), batch = ceil(target / accumulation).
//
// Decisions are cached like the auto-tuner's (the `autotune_cache` setting, one JSON file per
// key under <cache dir>/batch/): the key is the device fingerprint, the versions (accelkit,
// LibTorch, plugin), the model (parameter shapes and dtypes, the sample's shapes), the
// precision plan, the AdamW options and the search options. A cached decision is used while
// its memory at the largest batch still fits the budget of now (other processes may have taken
// memory since); otherwise the search runs again and rewrites it.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "accelkit/adamw_choice.hpp"
#include "accelkit/sdk/device.hpp"
#include "accelkit/sdk/optimizer.hpp"

namespace accelkit {

class Runtime;

struct BatchProblem {
  std::string name;                    // shown in the decision; optional
  torch::nn::Module* model = nullptr;  // on the runtime's device already (Runtime::prepare)
  std::function<at::Tensor(const at::Tensor& input)> forward;  // runs under the plan's autocast
  // Runs outside autocast; `output` is converted to fp32 first.
  std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)> loss;
  // A batch of `batch` samples, input and target, on the device.
  std::function<std::pair<at::Tensor, at::Tensor>(std::int64_t batch)> make_batch;
  AdamWConfig adamw;
  // Whose loop the model trains in: the trial steps' optimizer gets master weights as the
  // real one will (master_weights = auto: in accelkit's own loops only).
  ForwardOwner forwards = ForwardOwner::program;
};

struct BatchTrial {
  std::int64_t batch = 0;
  bool fits = false;
  std::uint64_t peak_bytes = 0;  // the most in use during the step (0 when not measured)
  double seconds = 0;            // the step's forward and backward (what grows with the batch)
  std::string note;              // "out of memory", "peak over the budget", "measured"
};

struct BatchSearchOptions {
  std::int64_t min = 1;
  std::int64_t max = 65536;
  // The first batch tried on a GPU; 0 = the device's preset (DeviceInfo property "preset
  // batch_size", the ROCm plugin's presets.toml) where it has one, else min.
  std::int64_t start = 0;
  std::int64_t target_effective_batch = 0;  // 0: none (accumulation 1)
  int margin_pct = -1;                      // -1: the memory_margin setting
  std::uint64_t memory_budget = 0;          // > 0: at most this many bytes for the training
  bool use_cache = true;                    // and the autotune_cache setting on
  // The host (CPU): a batch whose step takes longer than this many seconds is not an answer;
  // < 0: the batch_step_limit setting; 0: no limit.
  double max_step_seconds = -1;
  std::function<void(std::int64_t batch)> trial_starts;  // before each trial step
  std::function<void(const BatchTrial&)> progress;        // after each trial
};

struct BatchDecision {
  std::int64_t batch = 0;          // what to train with
  std::int64_t accumulation = 1;   // gradient-accumulation steps
  std::int64_t effective = 0;      // batch x accumulation
  std::int64_t largest = 0;        // the largest batch found to fit
  std::uint64_t memory_at_largest = 0;  // the step's peak at `largest` (measured or fitted)
  std::uint64_t budget = 0;        // bytes the search allowed
  int margin_pct = 0;
  std::string method;              // "search" (trials to the limit) | "fit" (measured growth)
  std::string device;              // the device's id ("cuda:0")
  std::string why;                 // one line for people
  std::vector<BatchTrial> trials;
  // Where the decision came from: "measured" (trials now) or "cache" (cache_file); "corrupt"
  // for an unreadable cache entry listed by list_batch_cache (why says what is wrong).
  std::string origin = "measured";
  std::string cache_file;          // "" when not cached
  std::string key;                 // the cache key (16 hex digits)
  std::string fingerprint;         // the device fingerprint and versions the key was made from
  std::string model;               // the model's signature
  std::string created;             // when measured, UTC ISO 8601
};

// Nothing fits, not even options.min: the message names the memory needed and available.
class BatchDoesNotFitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace batch_finder {

// The search on trials (pure; tested directly): grow x2 from start (min when 0) while trials
// fit, then binary search to within max(1, lo / 16). Throws BatchDoesNotFitError when
// options.min does not fit.
BatchDecision search(const std::function<BatchTrial(std::int64_t)>& trial, const BatchSearchOptions& options);

// The largest batch whose fitted memory (fixed + per_sample x batch) stays within `budget`,
// clamped to [min, max]; throws BatchDoesNotFitError when min does not fit.
std::int64_t fit(double fixed_bytes, double per_sample_bytes, std::uint64_t budget, const BatchSearchOptions& options);

// The host's answer (pure on `step`; tested directly): a warm step and one at options.min, then
// larger batches (x8, then x4) until the step's memory grows by 16 MiB, passes a quarter of
// `budget`, or its time nears `max_step_seconds`; forward+backward (`backward_peak`) and the
// whole step fitted as lines in the batch, the step's time as a third, the largest batch under
// all three, confirmed by a step at it (shrunk and measured again, up to three times, where it
// overshoots). Throws BatchDoesNotFitError when options.min does not fit.
BatchDecision fit_on_host(const std::function<BatchTrial(std::int64_t)>& step,
                          const std::function<std::uint64_t(std::int64_t)>& backward_peak,
                          const BatchSearchOptions& options, std::uint64_t budget, double max_step_seconds);

// The device's preset batch (its DeviceInfo property "preset batch_size"), 0 when none or not
// a positive number: where a search starts when BatchSearchOptions::start is 0.
std::int64_t preset_start(const DeviceInfo& info);

// Fills batch, accumulation and effective from decision.largest and the target.
void accumulate(BatchDecision& decision, std::int64_t target_effective_batch);

}  // namespace batch_finder

// The cached decisions under `dir` (each *.json in dir/batch), oldest first; unreadable
// entries come with origin "corrupt" and `why` saying what is wrong.
std::vector<BatchDecision> list_batch_cache(const std::string& dir);

// The batch-size finder for `rt`'s device: the largest batch it trains `problem` with inside
// the memory budget, and the accumulation steps for a target effective batch. Throws
// BatchDoesNotFitError when not even options.min fits.
BatchDecision find_batch_size(Runtime& rt, const BatchProblem& problem, const BatchSearchOptions& options = {});

}  // namespace accelkit
