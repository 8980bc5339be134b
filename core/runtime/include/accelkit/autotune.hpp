// The auto-tuner behind profile `auto`: times the candidate settings (precision, optimizer
// implementation, threads) on the caller's own model for a few synchronised steps, keeps the
// fastest whose loss stays finite and close to fp32's, and caches the decision keyed by the
// device fingerprint, the model signature and the LibTorch / accelkit / plugin versions.
//
//   accelkit::TuneProblem p;
//   p.model = model.get();
//   p.forward = [&](const at::Tensor& x) { return model->forward(x); };
//   p.loss = [](const at::Tensor& y, const at::Tensor& t) { return at::mse_loss(y, t); };
//   p.input = x; p.target = t;
//   accelkit::TuneDecision d = accelkit::autotune(*rt, p);   // then make_adamw(), autocast() as usual
//
// The model's parameters and buffers, and LibTorch's CPU generator, are restored after the
// trials: tuning leaves no trace in the training run except the chosen settings.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "accelkit/sdk/optimizer.hpp"
#include "accelkit/sdk/precision.hpp"

namespace torch::nn { class Module; }

namespace accelkit {

struct TuneCandidate {
  Dtype precision = Dtype::fp32;
  bool fused = false;                   // the plugin's fused optimizer; false: torch::optim
  int threads = 0;                      // 0 = leave LibTorch's count (GPU devices)
  std::string optimizer = "AdamW";      // the problem's optimizer ("AdamW" or "SGD"), for label()
  std::string label() const;            // "bf16, fused AdamW, 2 threads"
  bool operator==(const TuneCandidate& o) const {
    return precision == o.precision && fused == o.fused && threads == o.threads;
  }
};

struct TuneTrial {
  TuneCandidate candidate;
  bool reference = false;       // the fp32 + torch::optim run the others are compared with
  double median_ms = 0;         // per step, over the timed steps
  std::vector<double> losses;   // per step, warm-up included
  double rel_diff = 0;          // max over steps of |loss - reference| / |reference|
  bool eligible = false;        // matches the settings the user fixed
  bool accepted = false;        // eligible, finite, within tolerance
  std::string note;             // why rejected ("loss 0.31 off fp32's, tolerance 0.02"); error text
};

struct TuneDecision {
  TuneCandidate chosen;
  std::vector<TuneTrial> trials;  // empty when the decision came from the cache
  std::string origin;             // "benchmark" | "cache"
  std::string cache_file;         // the entry read or written; empty with the cache off
  std::string key;                // hex, the cache entry's name
  std::string device;             // fingerprint parts, as stored
  std::string model;
  std::string versions;
  std::string space;              // the candidate space, e.g. "precision {fp32, bf16} x ..."
  std::string created;            // UTC, ISO 8601, when the trials ran
  std::string why;                // one line
};

// What the tuner runs: the model, its forward and loss on one representative batch.
struct TuneProblem {
  std::string name;                  // shown in report; optional
  torch::nn::Module* model = nullptr;  // on the runtime's device already (Runtime::prepare)
  std::function<at::Tensor(const at::Tensor& input)> forward;  // runs under the candidate's autocast
  // Runs outside autocast; `output` is converted to fp32 first.
  std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)> loss;
  at::Tensor input;
  at::Tensor target;
  AdamWConfig adamw;
  // The program trains with SGD: set this (adamw is then unused). The trials compare the
  // device's fused SGD (Capability::fused_sgd) with torch::optim::SGD, and Runtime::make_sgd
  // follows the decision.
  std::optional<SGDConfig> sgd;
};

struct TuneProgress {
  int done = 0;               // trials finished
  int total = 0;
  std::string candidate;      // the one running now (empty when done)
};

struct TuneOptions {
  int warmup = 2;             // untimed steps per trial (their losses are still compared)
  int steps = 5;              // timed steps per trial
  double tolerance = 0;       // relative loss difference to fp32; 0 = 2e-2 (bf16/fp16) and 1e-3 (fp32)
  std::function<void(const TuneProgress&)> progress;
};

class Runtime;

// The auto-tuner: with the `autotune` setting on (profile auto), the cached decision for this
// device + model + versions, or trials timed now; the chosen precision, optimizer and threads
// then become what `rt` runs with, recorded beside the settings (Context::decisions(); the
// settings stay as resolved). With `autotune` off it tunes nothing and returns the current
// choices with origin "settings". Settings the user fixed (config file, environment, command
// line) are never overridden.
TuneDecision autotune(Runtime& rt, const TuneProblem& problem, const TuneOptions& options = {});
// The last autotune() decision on `rt`, if any.
const std::optional<TuneDecision>& last_tune_decision(const Runtime& rt);

// The cache directory: ACCELKIT_CACHE_DIR, else $XDG_CACHE_HOME/accelkit, else
// $HOME/.cache/accelkit (read with secure_getenv). Empty, and caching off (said once), when none
// can be named or it cannot be used (accelkit/decision_cache.hpp).
std::string decision_cache_dir();

// Picks from finished trials (pure; tested directly): the fastest accepted one. Marks
// eligible/accepted/note on every trial; throws std::runtime_error when the reference is
// missing or not finite (then nothing here can be trusted).
TuneCandidate choose_candidate(std::vector<TuneTrial>& trials, double bf16_tolerance, double fp32_tolerance);

class Context;
// The cache key's parts that do not depend on the model: the negotiated device (plugin, id,
// name, vendor, memory, capabilities, logical cores) and the versions (accelkit, LibTorch,
// the plugin). Throw DeviceUnavailableError when negotiation failed.
std::string autotune_device_fingerprint(const Context& ctx);
std::string autotune_versions(const Context& ctx);

// The cache entries under `dir` (each *.json in dir/autotune), oldest first. Entries that
// cannot be read are returned with origin "corrupt" and `why` saying what is wrong.
std::vector<TuneDecision> list_autotune_cache(const std::string& dir);

}  // namespace accelkit
