#include "accelkit/log.hpp"

#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace accelkit {

void init_logging(LogLevel level) {
  static std::once_flag once;
  std::call_once(once, [] {
    auto logger = spdlog::stderr_color_mt("accelkit");
    logger->set_pattern("accelkit: %^%l%$: %v");
    spdlog::set_default_logger(logger);
  });
  switch (level) {
    case LogLevel::trace: spdlog::set_level(spdlog::level::trace); break;
    case LogLevel::debug: spdlog::set_level(spdlog::level::debug); break;
    case LogLevel::info: spdlog::set_level(spdlog::level::info); break;
    case LogLevel::warn: spdlog::set_level(spdlog::level::warn); break;
    case LogLevel::error: spdlog::set_level(spdlog::level::err); break;
    case LogLevel::off: spdlog::set_level(spdlog::level::off); break;
  }
}

}  // namespace accelkit
