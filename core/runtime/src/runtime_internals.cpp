// The subsystems' access to the runtime (internals.hpp).
#include "accelkit/runtime/internals.hpp"

#include <cstdint>
#include <thread>

#include <spdlog/spdlog.h>

#include "accelkit/launch.hpp"
#include "tuning/step_tuning_control.hpp"

namespace accelkit::detail {

void RuntimeInternals::decide(Runtime& rt, const char* key, std::string value, std::string source, std::string why) {
  rt.decide(key, std::move(value), std::move(source), std::move(why));
}

bool RuntimeInternals::master_weights_asked(const Runtime& rt, ForwardOwner forwards) {
  return rt.master_weights_asked(forwards);
}

AutocastScope RuntimeInternals::plan_autocast(const Runtime& rt) { return rt.plan_autocast(); }

void RuntimeInternals::join_data_parallel(Runtime& rt, int local_ranks, StepAgreement agreement) {
  // On a CPU, the host's physical cores shared between its ranks unless `threads` is set.
  if (rt.torch_device_.is_cpu() && local_ranks > 1) {
    const Config& c = rt.context_->config();
    const std::uint32_t cores =
        rt.device_->info().cores ? rt.device_->info().cores : std::thread::hardware_concurrency();
    if (c.threads.user_set()) {
      if (static_cast<std::int64_t>(*c.threads) * local_ranks > static_cast<std::int64_t>(cores))
        spdlog::warn("threads = {} (from {}) in each of {} ranks on {} cores: oversubscribed", *c.threads,
                     c.threads.from(), local_ranks, cores);
    } else {
      const int each = dist::threads_per_rank(cores, local_ranks);
      rt.current_.threads = each;
      rt.apply_plan(rt.settings_request());
      rt.decide("threads", std::to_string(each), "data-parallel run",
                std::to_string(cores) + " physical cores shared by " + std::to_string(local_ranks) +
                    " ranks on this host (no oversubscription)");
    }
  }
  // Every rank must run one configuration: the ranks decide together, or not at all.
  if (agreement) rt.steps_->agree_on_steps(std::move(agreement));
  else if (rt.steps_->on()) rt.steps_->turn_off("off in a data-parallel run: every rank runs the same configuration");
}

}  // namespace accelkit::detail
