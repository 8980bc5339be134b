// The process-wide logger (spdlog, to stderr). Levels: trace debug info warn error off.
#pragma once

#include "accelkit/settings.hpp"

namespace accelkit {

// Sets up the default logger once; later calls only change the level.
void init_logging(LogLevel level = LogLevel::warn);

}  // namespace accelkit
