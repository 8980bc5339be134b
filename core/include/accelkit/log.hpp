// The process-wide logger (spdlog, to stderr). Levels: trace debug info warn error off.
#pragma once

#include <string>

namespace accelkit {

// Sets up the default logger once; later calls only change the level. Returns false for an
// unknown level name (the level is then left as it was).
bool init_logging(const std::string& level = "warn");

}  // namespace accelkit
