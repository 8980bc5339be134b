// The error every room throws when a requested device cannot be had.
#pragma once

#include <stdexcept>

namespace accelkit {

// A requested device could not be had (exit code 3). what() lists what is available.
class DeviceUnavailableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace accelkit
