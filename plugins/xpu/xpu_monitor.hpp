// accelkit::Monitor for one Intel GPU: the i915/xe driver's hwmon (energy1_input -> power
// between two samples, power1_max -> the power limit, temp<N>_input on xe), its frequency
// files, its local-memory files (i915 backports), and Level Zero Sysman where loaded
// (temperature, which i915's hwmon lacks; energy; frequency; memory free/size). A driver file
// wins over Sysman for the same figure; a missing one reads n/a with a note, a malformed one
// is refused with the reason (sysfs_value.hpp), and an energy counter that goes backwards
// (wrapped or reset) gives no power for that sample.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <accelkit/sdk/monitor.hpp>

#include "xpu_probe.hpp"

namespace accelkit::xpu {

class XpuMonitor final : public Monitor {
 public:
  // `sysman`: null when Level Zero is not loaded (or does not list this GPU).
  XpuMonitor(XpuGpu gpu, std::shared_ptr<const SysmanApi> sysman);
  Result<std::vector<Reading>> sample() noexcept override;

 private:
  struct Energy {
    double joules;
    double seconds;  // on the clock the counter came with
  };
  std::vector<Reading> sample_unchecked();
  Reading power(const std::optional<Energy>& now, const std::string& source, const std::string& missing);

  XpuGpu gpu_;
  std::shared_ptr<const SysmanApi> sysman_;
  std::mutex mutex_;
  std::optional<Energy> last_;
};

}  // namespace accelkit::xpu
