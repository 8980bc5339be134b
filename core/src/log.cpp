#include "accelkit/log.hpp"

#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace accelkit {

bool init_logging(const std::string& level) {
  static std::once_flag once;
  std::call_once(once, [] {
    auto logger = spdlog::stderr_color_mt("accelkit");
    logger->set_pattern("accelkit: %^%l%$: %v");
    spdlog::set_default_logger(logger);
  });
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") return false;
  spdlog::set_level(lvl);
  return true;
}

}  // namespace accelkit
