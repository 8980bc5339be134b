// The batch-size finder's decisions: as text (bench, train, report) and JSON.
#pragma once

#include <ostream>

#include "accelkit/batch_finder.hpp"
#include "accelkit/context.hpp"
#include "json_out.hpp"

namespace accelkit::cli {

// One decision: the batch, where it came from, and each trial step when it was measured now.
void render_batch_decision(std::ostream& out, const BatchDecision& d);
Json batch_decision_json(const BatchDecision& d);

// One trial as it happens (a progress line).
std::string batch_trial_line(const BatchTrial& t);

// report: the cached decisions for this device and these versions (others counted, corrupt
// entries listed with what is wrong).
void render_batch_cache(std::ostream& out, const Context& ctx);
Json batch_cache_json(const Context& ctx);

}  // namespace accelkit::cli
