#include "nvml_monitor.hpp"

namespace accelkit::cuda {

NvmlMonitor::NvmlMonitor(const NvmlApi* nvml, NvmlDevice device, std::string unavailable)
    : nvml_(nvml), device_(device), unavailable_(std::move(unavailable)) {}

Result<std::vector<Reading>> NvmlMonitor::sample() noexcept {
  return guarded("cuda monitor", [&] { return sample_unchecked(); });
}

std::vector<Reading> NvmlMonitor::sample_unchecked() const {
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
  auto at = [&](std::size_t i) -> Reading& { return out[i]; };

  if (!nvml_ || !device_) {
    const std::string note = "n/a: " + (unavailable_.empty() ? std::string("NVML has no handle for this GPU") : unavailable_);
    for (auto& r : out) r.note = note;
    return out;
  }
  auto fail = [&](Reading& r, NvmlReturn e) {
    r.note = (e == kNvmlErrorNotSupported ? "n/a: not supported on this device (" : "n/a: NVML error (") +
             nvml_error_text(*nvml_, e) + ")";
  };
  auto set = [&](Reading& r, NvmlReturn e, double v) {
    if (e == kNvmlSuccess) r.value = v;
    else fail(r, e);
  };

  unsigned int u = 0;
  NvmlReturn e = nvml_->temperature(device_, kNvmlTemperatureGpu, &u);
  set(at(0), e, u);
  e = nvml_->power_usage(device_, &u);
  set(at(1), e, u / 1000.0);
  e = nvml_->power_limit(device_, &u);
  set(at(2), e, u / 1000.0);
  e = nvml_->clock(device_, kNvmlClockSm, &u);
  set(at(3), e, u);
  e = nvml_->clock(device_, kNvmlClockMem, &u);
  set(at(4), e, u);
  if (nvml_->clock_event_reasons) {
    unsigned long long mask = 0;
    e = nvml_->clock_event_reasons(device_, &mask);
    set(at(5), e, static_cast<double>(mask));
    if (e == kNvmlSuccess) at(5).note = clock_event_reason_names(mask);
  } else {
    at(5).note = "n/a: this NVML has no clocks event reasons query";
  }
  NvmlUtilization util{};
  e = nvml_->utilization(device_, &util);
  set(at(6), e, util.gpu);
  set(at(7), e, util.memory);
  NvmlMemory mem{};
  e = nvml_->memory(device_, &mem);
  set(at(8), e, static_cast<double>(mem.used));
  set(at(9), e, static_cast<double>(mem.total));
  // What the thermal guard acts on: the GPU's own slowdown temperature, and whether it slows
  // itself down now (the protective reasons of the clocks-event mask).
  if (nvml_->temperature_threshold) {
    Reading limit{reading::temperature_limit_c, std::nullopt, "C", "NVML slowdown temperature", ""};
    e = nvml_->temperature_threshold(device_, kNvmlTemperatureThresholdSlowdown, &u);
    set(limit, e, u);
    out.push_back(std::move(limit));
  }
  Reading throttled{reading::throttled, std::nullopt, "bool", "NVML clocks event reasons", ""};
  if (at(5).value) {
    const auto mask = static_cast<unsigned long long>(*at(5).value) & kNvmlThrottleMask;
    throttled.value = mask ? 1.0 : 0.0;
    throttled.note = mask ? clock_event_reason_names(mask) : std::string();
  } else {
    throttled.note = at(5).note;
  }
  out.push_back(std::move(throttled));
  return out;
}

}  // namespace accelkit::cuda
