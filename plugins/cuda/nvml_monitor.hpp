// accelkit::Monitor for one NVIDIA GPU through NVML: temperature, power and its enforced
// limit, SM and memory clocks, clock-event (throttle) reasons, utilisation, memory used/total.
// NOT_SUPPORTED (and every other NVML error) reads as n/a with the NVML error in the note.
#pragma once

#include <string>
#include <vector>

#include <accelkit/sdk/monitor.hpp>

#include "nvml_api.hpp"

namespace accelkit::cuda {

namespace reading_key {
inline constexpr const char* clock_event_reasons = "clock_event_reasons";
inline constexpr const char* memory_utilisation_pct = "memory_utilisation_pct";
}  // namespace reading_key

class NvmlMonitor final : public Monitor {
 public:
  // `nvml` may be null (every reading n/a with `unavailable` as the note); it must outlive
  // the monitor. `device` is the handle matched to this GPU (null: not matched).
  NvmlMonitor(const NvmlApi* nvml, NvmlDevice device, std::string unavailable);

  Result<std::vector<Reading>> sample() noexcept override;

 private:
  std::vector<Reading> sample_unchecked() const;

  const NvmlApi* nvml_;
  NvmlDevice device_;
  std::string unavailable_;
};

}  // namespace accelkit::cuda
