// accelkit::Monitor for one AMD GPU, from amdgpu sysfs: temperature (hwmon temp1_input),
// power (power1_average, or power1_input on kernels that only have that), VRAM used/total,
// utilisation (gpu_busy_percent) and shader/memory clocks (the '*' line of pp_dpm_sclk/mclk).
// Files are read on each sample; a missing one reads as n/a with a note.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <accelkit/sdk/monitor.hpp>

#include "amdgpu_card.hpp"

namespace accelkit::rocm {

class RocmMonitor final : public Monitor {
 public:
  explicit RocmMonitor(AmdgpuCard card);
  Result<std::vector<Reading>> sample() noexcept override;

 private:
  std::vector<Reading> sample_unchecked() const;
  AmdgpuCard card_;
};

// The current level's clock in MHz from a pp_dpm_* file ("1: 1750Mhz *"), or nullopt.
std::optional<double> current_dpm_mhz(std::string_view text);

}  // namespace accelkit::rocm
