#include "mps_host.hpp"

#include <notify.h>
#include <sys/sysctl.h>
#include <sys/types.h>

#include <vector>

namespace accelkit::mps {

std::string sysctl_string(const char* name) {
  std::size_t size = 0;
  if (::sysctlbyname(name, nullptr, &size, nullptr, 0) != 0 || size == 0) return {};
  std::vector<char> buf(size);
  if (::sysctlbyname(name, buf.data(), &size, nullptr, 0) != 0) return {};
  return std::string(buf.data());
}

std::uint64_t sysctl_u64(const char* name) {
  std::uint64_t value = 0;
  std::size_t size = sizeof value;
  if (::sysctlbyname(name, &value, &size, nullptr, 0) != 0) return 0;
  return value;
}

std::optional<int> thermal_pressure_level() {
  static int token = -1;  // registered once, kept for the process
  if (token < 0 && ::notify_register_check("com.apple.system.thermalpressurelevel", &token) != NOTIFY_STATUS_OK) {
    token = -1;
    return std::nullopt;
  }
  std::uint64_t state = 0;
  if (::notify_get_state(token, &state) != NOTIFY_STATUS_OK) return std::nullopt;
  return static_cast<int>(state);
}

const char* thermal_pressure_name(int level) {
  switch (level) {
    case 0: return "nominal";
    case 1: return "moderate";
    case 2: return "heavy";
    case 3: return "trapping";
    case 4: return "sleeping";
  }
  return "unknown";
}

}  // namespace accelkit::mps
