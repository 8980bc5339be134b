// Operation routing for report: each operation class, where it runs and why.
#pragma once

#include <ostream>

#include "accelkit/context.hpp"
#include "json_out.hpp"

namespace accelkit::cli {

// The routes of the negotiated device (decision().ok must hold).
void render_routing(std::ostream& out, const Context& ctx);
// [{op, device, on_device, origin, source, reason}, ...]
Json routing_json(const Context& ctx);

}  // namespace accelkit::cli
