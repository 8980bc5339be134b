// The auto-tuner's part in the Runtime (autotune.hpp has the idea and the free function that
// runs it): the candidates the settings leave, the trials on the caller's model, the decision
// adopted as what the runtime runs with, cached, and kept as the last one. One per Runtime,
// which owns it and lets it change its choices (a friend).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "accelkit/autotune.hpp"

namespace accelkit {

class Runtime;
class ModelSnapshot;  // model_snapshot.hpp
struct TuneSpace;     // autotune.cpp

namespace detail {

class AutoTuner {
 public:
  // The runtime's own (accelkit::autotune and last_tune_decision reach it here).
  static AutoTuner& of(Runtime& rt);
  static const AutoTuner& of(const Runtime& rt);
  explicit AutoTuner(Runtime& rt) : rt_(rt) {}
  AutoTuner(const AutoTuner&) = delete;
  AutoTuner& operator=(const AutoTuner&) = delete;

  // accelkit::autotune (autotune.hpp).
  TuneDecision tune(const TuneProblem& problem, const TuneOptions& options);
  // The last tune() decision, if any.
  const std::optional<TuneDecision>& last() const noexcept { return last_; }

 private:
  // With the `autotune` setting off: the current choices, origin "settings".
  TuneDecision settings_decision(const TuneProblem& problem);
  // The candidates tune() may choose from, narrowed by what the user fixed.
  TuneSpace tune_space(bool sgd) const;
  // The cache entry at d.cache_file where it fits `d`, adopted; nullopt (with a warning for an
  // entry that does not fit) otherwise.
  std::optional<TuneDecision> from_cache(const TuneDecision& d, const TuneSpace& space);
  // Every trial in turn, each from the weights and random state `snapshot` holds; the model is
  // left as it was before them.
  void run_trials(const TuneProblem& problem, const TuneOptions& options, const at::Tensor& target,
                  ModelSnapshot& snapshot, std::vector<TuneTrial>& trials);
  void run_trial(const TuneProblem& problem, const TuneOptions& options, const at::Tensor& target, TuneTrial& trial);
  // choose_candidate; where it throws, the plan the trials began with is put back first.
  TuneCandidate choose(std::vector<TuneTrial>& trials, double bf16_tolerance, double fp32_tolerance,
                       const PrecisionPlan& plan_before);
  // The decision becomes what the runtime runs with (where the user fixed nothing), recorded
  // beside the settings; step tuning is off from here.
  void adopt_tuning(const TuneDecision& decision, const TuneSpace& space, const std::string& source);

  Runtime& rt_;
  std::optional<TuneDecision> last_;
};

}  // namespace detail
}  // namespace accelkit
