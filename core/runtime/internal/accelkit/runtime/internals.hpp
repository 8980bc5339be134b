// What the subsystems built on the runtime (the batch finder, inference, data-parallel training:
// the rooms above this one) may do to a Runtime beyond its public API: record a decision, ask
// whether master weights were requested, open the plan's own autocast for their trials, and
// share the host's cores between the ranks of a data-parallel run. Not installed.
#pragma once

#include <string>

#include "accelkit/runtime.hpp"

namespace accelkit::detail {

struct RuntimeInternals {
  // Records a decision beside the settings (Context::record) and logs it.
  static void decide(Runtime& rt, const char* key, std::string value, std::string source, std::string why);
  // Whether the settings ask for master weights for a model whose forwards `forwards` runs.
  static bool master_weights_asked(const Runtime& rt, ForwardOwner forwards);
  // The plan's autocast, for accelkit's own trials (no step tuning).
  static AutocastScope plan_autocast(const Runtime& rt);
  // Called by dist::init for a run of several processes: on a CPU, the host's physical cores
  // shared between its `local_ranks` ranks unless `threads` is set (recorded as the "threads"
  // decision); step tuning observes again at those threads and the ranks decide together
  // through `agreement` (step_tuning.hpp; without one it is off: every rank must run one
  // configuration).
  static void join_data_parallel(Runtime& rt, int local_ranks, StepAgreement agreement);
};

}  // namespace accelkit::detail
