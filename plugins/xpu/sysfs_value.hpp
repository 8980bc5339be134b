// Reading one number from a sysfs file under the host-file reader's rules: a missing file is a
// sensor this machine does not have (nullopt, nothing said); an unreadable file or one holding
// anything but the expected number is refused (nullopt, and why in `problem`), never trusted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace accelkit::xpu {

// A non-negative decimal integer (a byte count, microjoules, microwatts, MHz, m°C >= 0).
std::optional<std::uint64_t> read_count(const std::string& path, std::string* problem);

// A decimal integer that may be negative (a temperature in m°C).
std::optional<std::int64_t> read_signed(const std::string& path, std::string* problem);

}  // namespace accelkit::xpu
