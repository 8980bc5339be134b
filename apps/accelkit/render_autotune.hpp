// The auto-tuner's decisions: as text (bench, report) and JSON (report --json).
#pragma once

#include <ostream>
#include <vector>

#include "accelkit/autotune.hpp"
#include "json_out.hpp"

namespace accelkit::cli {

// One decision: what was chosen, from where, and every trial when it was timed now.
void render_autotune(std::ostream& out, const TuneDecision& d);
Json autotune_json(const TuneDecision& d);

// report: the `autotune` setting, the cache directory, and the cached decisions for this
// device and these versions (entries for other devices or versions are counted; corrupt ones
// are listed with what is wrong).
void render_autotune_cache(std::ostream& out, const Context& ctx);
Json autotune_cache_json(const Context& ctx);

}  // namespace accelkit::cli
