// The thermal and power guard: a background sampler reads the device's monitor (the plugin's
// sensors) every `interval_s`, and the training loop asks it between steps what to do.
//
//   temperature >= threshold   policy warn:  a "warn" event (once per crossing)
//                              policy pause: a "pause" event, then check() blocks until the
//                                            device is below threshold - hysteresis (or the
//                                            interrupt flag is set), then a "resume" event
//                              policy stop:  a "stop" event; check() returns GuardAction::stop
//                                            (the trainer saves a checkpoint and ends)
//   the device slows itself     a "throttle" event (NVML clock-event reasons, ...), any policy
//   power > the power limit     a "power" event (guard_power), any policy
//   an implausible reading      a "sensor" event naming it; the value is n/a and never acted on
//                              (negative kelvin, 10^7 C, a counter that wrapped: readings.hpp)
//
// The threshold is the guard_temperature setting, or else the device's own slowdown
// temperature as its plugin reports it (reading::temperature_limit_c: NVML's slowdown
// threshold, hwmon temp*_max / temp*_crit). With neither, the guard still samples (the
// readings go to the run's metrics) and says it has no threshold. The thresholds that make no
// sense (below room temperature, above 150 C) are refused by the settings.
//
// Thread-safety: check(), latest() and events() may be called from any one thread while the
// sampler runs; the monitor is sampled from the sampler thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "accelkit/sdk/monitor.hpp"
#include "accelkit/settings.hpp"

namespace accelkit {

class Runtime;

struct GuardOptions {
  double interval_s = 5;  // between samples; 0 = the guard is off
  GuardPolicy policy = GuardPolicy::warn;
  std::optional<double> temperature_c;  // the threshold; nullopt = the device's own, if any
  double hysteresis_c = 5;
  std::optional<double> power_w;        // nullopt = no power threshold
  // Every event as it happens, on the thread that raised it (the training thread).
  std::function<void(const struct GuardEvent&)> on_event;
};

struct GuardReading {
  bool sampled = false;  // false until the first sample
  std::optional<double> temperature_c;
  std::optional<double> power_w;
  std::optional<double> clock_mhz;
  std::optional<double> temperature_limit_c;  // the device's own threshold, where it has one
  std::string limit_source;
  std::optional<bool> throttled;   // nullopt: the device does not say
  std::string throttle_reasons;    // when throttled
  // Readings screened out as implausible: "temperature_c: implausible: 1e+07 C ...".
  std::vector<std::string> implausible;
  std::uint64_t sequence = 0;      // counts samples
};

struct GuardEvent {
  std::string kind;  // warn | pause | resume | stop | throttle | power | sensor
  std::int64_t step = 0;  // steps completed when it happened
  std::optional<double> value;
  std::optional<double> threshold;
  double paused_s = 0;  // resume: how long the pause lasted
  std::string text;     // one line for people
};

enum class GuardAction { proceed, stop };

class Guard {
 public:
  // A guard that is off (why says so): check() always proceeds.
  explicit Guard(std::string why_off);
  // Samples `monitor` every options.interval_s on a thread of its own; the first sample is
  // taken here, so the device's own threshold is known on return.
  Guard(std::shared_ptr<Monitor> monitor, GuardOptions options, std::string device);
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

  bool enabled() const noexcept { return monitor_ != nullptr; }
  // "every 5 s on cuda:0; pause at 87 C (NVML slowdown temperature) until 82 C", or why off.
  const std::string& describe() const noexcept { return describe_; }
  std::optional<double> temperature_threshold() const noexcept { return threshold_; }

  // Between steps, on the training thread (`step`: steps completed). Blocks while paused;
  // `interrupt` set (Ctrl-C) ends a pause at once and check() returns proceed.
  GuardAction check(std::int64_t step, const std::atomic<bool>* interrupt = nullptr);

  GuardReading latest() const;
  std::vector<GuardEvent> events() const;

 private:
  void sampler();
  GuardReading read_once();
  void raise(GuardEvent event);

  // check()'s parts (the training thread only). An event at `step`, its text prefixed with the
  // device and followed by the step.
  void raise_event(std::int64_t step, const char* kind, std::optional<double> value,
                   std::optional<double> threshold, std::string text);
  // The events any policy raises: implausible readings, throttling, power over the limit.
  void report_readings(std::int64_t step, const GuardReading& r);
  // What the policy does at temperature `t`, the threshold known.
  GuardAction on_temperature(std::int64_t step, double t, const std::atomic<bool>* interrupt);
  // Blocks until the device is below `cool` (or the interrupt flag, or the guard ends), between
  // a "pause" and a "resume" event.
  void pause(std::int64_t step, double t, double cool, const std::atomic<bool>* interrupt);
  // Waits for the sampler's readings until one is below `cool`; returns why the wait ended
  // ("cooled", "interrupted", ...), `last` the last temperature read.
  std::string wait_until_below(double cool, const std::atomic<bool>* interrupt, std::optional<double>& last);

  std::shared_ptr<Monitor> monitor_;
  GuardOptions options_;
  std::string device_;
  std::optional<double> threshold_;
  std::string describe_;

  mutable std::mutex mutex_;
  std::condition_variable sampled_;
  GuardReading latest_;
  std::vector<GuardEvent> events_;
  bool stopping_ = false;
  std::thread thread_;

  // check()'s state (the training thread only).
  bool over_ = false;       // above the threshold since the last warn
  bool throttled_ = false;  // throttling reported, not yet ended
  bool power_over_ = false;
  std::vector<std::string> sensors_reported_;
};

// The thermal and power guard for `rt`'s device, as the guard_* settings say; off, with the
// reason in describe(), when guard_interval is 0, the sampler setting is off or the device has
// no monitor. `on_event` gets every event on the thread that checks.
std::unique_ptr<Guard> make_guard(const Runtime& rt, std::function<void(const GuardEvent&)> on_event = {});

}  // namespace accelkit
