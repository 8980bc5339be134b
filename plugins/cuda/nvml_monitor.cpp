#include "nvml_monitor.hpp"

namespace accelkit::cuda {

namespace {

// Where each of the readings every sample starts with stands in it.
enum Slot : std::size_t {
  kTemperature,
  kPower,
  kPowerLimit,
  kSmClock,
  kMemoryClock,
  kClockEvents,
  kGpuUtilisation,
  kMemoryUtilisation,
  kMemoryUsed,
  kMemoryTotal,
};

// The readings every sample starts with, in Slot order, none read yet.
std::vector<Reading> blank_readings() {
  struct Spec {
    const char* key;
    const char* unit;
    const char* source;
  };
  static constexpr Spec kSpecs[] = {
      {reading::temperature_c, "C", "NVML GPU temperature"},
      {reading::power_w, "W", "NVML power usage"},
      {reading::power_limit_w, "W", "NVML enforced power limit"},
      {reading::clock_mhz, "MHz", "NVML SM clock"},
      {reading::memory_clock_mhz, "MHz", "NVML memory clock"},
      {reading_key::clock_event_reasons, "mask", "NVML clocks event reasons"},
      {reading::utilisation_pct, "%", "NVML GPU utilisation"},
      {reading_key::memory_utilisation_pct, "%", "NVML memory controller utilisation"},
      {reading::memory_used_bytes, "bytes", "NVML memory info"},
      {reading::memory_total_bytes, "bytes", "NVML memory info"},
  };
  std::vector<Reading> out;
  for (const auto& s : kSpecs) out.push_back(Reading{s.key, std::nullopt, s.unit, s.source, ""});
  return out;
}

// One GPU's NVML queries, each turned into a reading's value or, on an error, its note.
class NvmlQueries {
 public:
  NvmlQueries(const NvmlApi& nvml, NvmlDevice device) : nvml_(nvml), device_(device) {}

  // The readings of blank_readings(), in place.
  void read_all(std::vector<Reading>& out) const {
    unsigned int u = 0;
    NvmlReturn e = nvml_.temperature(device_, kNvmlTemperatureGpu, &u);
    set(out[kTemperature], e, u);
    e = nvml_.power_usage(device_, &u);
    set(out[kPower], e, u / 1000.0);
    e = nvml_.power_limit(device_, &u);
    set(out[kPowerLimit], e, u / 1000.0);
    e = nvml_.clock(device_, kNvmlClockSm, &u);
    set(out[kSmClock], e, u);
    e = nvml_.clock(device_, kNvmlClockMem, &u);
    set(out[kMemoryClock], e, u);
    read_clock_events(out[kClockEvents]);
    NvmlUtilization util{};
    e = nvml_.utilization(device_, &util);
    set(out[kGpuUtilisation], e, util.gpu);
    set(out[kMemoryUtilisation], e, util.memory);
    NvmlMemory mem{};
    e = nvml_.memory(device_, &mem);
    set(out[kMemoryUsed], e, static_cast<double>(mem.used));
    set(out[kMemoryTotal], e, static_cast<double>(mem.total));
  }

  // The GPU's own slowdown temperature (this NVML has the threshold query).
  Reading temperature_limit() const {
    Reading limit{reading::temperature_limit_c, std::nullopt, "C", "NVML slowdown temperature", ""};
    unsigned int u = 0;
    const NvmlReturn e = nvml_.temperature_threshold(device_, kNvmlTemperatureThresholdSlowdown, &u);
    set(limit, e, u);
    return limit;
  }

 private:
  void read_clock_events(Reading& r) const {
    if (!nvml_.clock_event_reasons) {
      r.note = "n/a: this NVML has no clocks event reasons query";
      return;
    }
    unsigned long long mask = 0;
    const NvmlReturn e = nvml_.clock_event_reasons(device_, &mask);
    set(r, e, static_cast<double>(mask));
    if (e == kNvmlSuccess) r.note = clock_event_reason_names(mask);
  }

  void set(Reading& r, NvmlReturn e, double v) const {
    if (e == kNvmlSuccess) {
      r.value = v;
      return;
    }
    r.note = (e == kNvmlErrorNotSupported ? "n/a: not supported on this device (" : "n/a: NVML error (") +
             nvml_error_text(nvml_, e) + ")";
  }

  const NvmlApi& nvml_;
  NvmlDevice device_;
};

// Whether the GPU slows itself down now: the protective reasons of the clocks-event mask.
Reading throttled_reading(const Reading& clock_events) {
  Reading throttled{reading::throttled, std::nullopt, "bool", "NVML clocks event reasons", ""};
  if (clock_events.value) {
    const auto mask = static_cast<unsigned long long>(*clock_events.value) & kNvmlThrottleMask;
    throttled.value = mask ? 1.0 : 0.0;
    throttled.note = mask ? clock_event_reason_names(mask) : std::string();
  } else {
    throttled.note = clock_events.note;
  }
  return throttled;
}

}  // namespace

NvmlMonitor::NvmlMonitor(const NvmlApi* nvml, NvmlDevice device, std::string unavailable)
    : nvml_(nvml), device_(device), unavailable_(std::move(unavailable)) {}

Result<std::vector<Reading>> NvmlMonitor::sample() noexcept {
  return guarded("cuda monitor", [&] { return sample_unchecked(); });
}

std::vector<Reading> NvmlMonitor::sample_unchecked() const {
  std::vector<Reading> out = blank_readings();
  if (!nvml_ || !device_) {
    const std::string note = "n/a: " + (unavailable_.empty() ? std::string("NVML has no handle for this GPU") : unavailable_);
    for (auto& r : out) r.note = note;
    return out;
  }
  const NvmlQueries nvml(*nvml_, device_);
  nvml.read_all(out);
  // What the thermal guard acts on: the GPU's own slowdown temperature, and whether it slows
  // itself down now.
  if (nvml_->temperature_threshold) out.push_back(nvml.temperature_limit());
  Reading throttled = throttled_reading(out[kClockEvents]);
  out.push_back(std::move(throttled));
  return out;
}

}  // namespace accelkit::cuda
