// Where hardware files are read from. ACCELKIT_SYSFS_ROOT stands in for /sys and
// ACCELKIT_PROCFS_ROOT for /proc, so every plugin's probe and monitor can be tested against
// fixture trees. Read with secure_getenv (ignored in setuid processes).
//
// Thread-safety: reads the environment on each call; do not setenv concurrently.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

namespace accelkit {

inline const char* secure_env(const char* name) noexcept {
#if defined(__GLIBC__)
  return ::secure_getenv(name);
#else
  return std::getenv(name);
#endif
}

namespace detail {
inline std::string rooted(const char* env, std::string_view real_root, std::string_view rel) {
  const char* root = secure_env(env);
  std::string out = (root && *root) ? std::string(root) : std::string(real_root);
  if (!rel.empty() && rel.front() != '/') out += '/';
  out += rel;
  return out;
}
}  // namespace detail

// sysfs_path("class/hwmon") -> "/sys/class/hwmon", or "$ACCELKIT_SYSFS_ROOT/class/hwmon".
inline std::string sysfs_path(std::string_view rel) { return detail::rooted("ACCELKIT_SYSFS_ROOT", "/sys", rel); }
// procfs_path("meminfo") -> "/proc/meminfo", or "$ACCELKIT_PROCFS_ROOT/meminfo".
inline std::string procfs_path(std::string_view rel) { return detail::rooted("ACCELKIT_PROCFS_ROOT", "/proc", rel); }

}  // namespace accelkit
