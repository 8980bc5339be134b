#include "accelkit/guard.hpp"

#include <cmath>
#include <cstdio>
#include <utility>

#include <spdlog/spdlog.h>

#include "accelkit/readings.hpp"
#include "accelkit/runtime.hpp"

namespace accelkit {

namespace {

// "87.0 C": `v` with `decimals` digits after the point, then its unit.
std::string with_unit(double v, int decimals, const char* unit) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, unit);
  return buf;
}

std::string degrees(double c) { return with_unit(c, 1, "C"); }

std::string watts(double w) { return with_unit(w, 0, "W"); }

using Clock = std::chrono::steady_clock;

}  // namespace

Guard::Guard(std::string why_off) : describe_("thermal guard off: " + std::move(why_off)) {}

Guard::Guard(std::shared_ptr<Monitor> monitor, GuardOptions options, std::string device)
    : monitor_(std::move(monitor)), options_(std::move(options)), device_(std::move(device)) {
  if (!monitor_) {
    describe_ = "thermal guard off: " + device_ + " has no monitor";
    return;
  }
  // The first sample: the device's own threshold, and the readings at the start.
  latest_ = read_once();
  std::string threshold_from;
  if (options_.temperature_c) {
    threshold_ = options_.temperature_c;
    threshold_from = "guard_temperature";
  } else if (latest_.temperature_limit_c) {
    threshold_ = latest_.temperature_limit_c;
    threshold_from = latest_.limit_source.empty() ? "the device's own slowdown temperature" : latest_.limit_source;
  }
  char every[32];
  std::snprintf(every, sizeof every, "%g s", options_.interval_s);
  describe_ = "thermal guard: every " + std::string(every) + " on " + device_ + "; ";
  if (threshold_) {
    describe_ += std::string(to_string(options_.policy)) + " at " + degrees(*threshold_) + " (" + threshold_from + ")";
    if (options_.policy == GuardPolicy::pause) describe_ += " until " + degrees(*threshold_ - options_.hysteresis_c);
    if (options_.policy == GuardPolicy::stop) describe_ += ", after a checkpoint";
  } else {
    describe_ += "no temperature threshold (the device reports none: set guard_temperature)";
  }
  describe_ += latest_.temperature_c ? "; now " + degrees(*latest_.temperature_c) : "; temperature n/a";
  if (options_.power_w) describe_ += "; warn above " + watts(*options_.power_w);
  thread_ = std::thread([this] { sampler(); });
}

Guard::~Guard() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  sampled_.notify_all();
  if (thread_.joinable()) thread_.join();
}

GuardReading Guard::read_once() {
  GuardReading out;
  auto sample = monitor_->sample();
  out.sampled = true;
  if (!sample.ok()) {
    out.implausible.push_back("monitor: " + sample.status().message());
    return out;
  }
  std::vector<Reading> readings = sample.value();
  std::vector<Reading> raw = readings;
  screen_readings(readings);
  for (std::size_t i = 0; i < readings.size(); ++i) {
    const Reading& r = readings[i];
    if (raw[i].value && !r.value) out.implausible.push_back(r.key + ": " + r.note);
    if (!r.value) continue;
    if (r.key == reading::temperature_c) out.temperature_c = r.value;
    else if (r.key == reading::power_w) out.power_w = r.value;
    else if (r.key == reading::clock_mhz) out.clock_mhz = r.value;
    else if (r.key == reading::temperature_limit_c) {
      out.temperature_limit_c = r.value;
      out.limit_source = r.source;
    }
    else if (r.key == reading::throttled) {
      out.throttled = *r.value != 0;
      if (*out.throttled) out.throttle_reasons = r.note;
    }
  }
  return out;
}

void Guard::sampler() {
  const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.interval_s));
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (sampled_.wait_for(lock, period, [this] { return stopping_; })) return;
    lock.unlock();
    GuardReading r = read_once();
    lock.lock();
    r.sequence = latest_.sequence + 1;
    latest_ = std::move(r);
    sampled_.notify_all();
  }
}

GuardReading Guard::latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

std::vector<GuardEvent> Guard::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

void Guard::raise(GuardEvent event) {
  // A warning in the log unless the caller shows the events itself (the CLI prints each).
  const bool alarming = event.kind == "warn" || event.kind == "throttle" || event.kind == "power" ||
                        event.kind == "sensor" || event.kind == "stop";
  if (alarming && !options_.on_event) spdlog::warn("{}", event.text);
  else spdlog::info("{}", event.text);
  if (options_.on_event) options_.on_event(event);
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
}

GuardAction Guard::check(std::int64_t step, const std::atomic<bool>* interrupt) {
  if (!monitor_) return GuardAction::proceed;
  const GuardReading r = latest();
  report_readings(step, r);
  if (!threshold_ || !r.temperature_c) return GuardAction::proceed;
  return on_temperature(step, *r.temperature_c, interrupt);
}

void Guard::raise_event(std::int64_t step, const char* kind, std::optional<double> value,
                        std::optional<double> threshold, std::string text) {
  GuardEvent e;
  e.kind = kind;
  e.step = step;
  e.value = value;
  e.threshold = threshold;
  e.text = device_ + ": " + std::move(text) + " (step " + std::to_string(step) + ")";
  raise(std::move(e));
}

void Guard::report_readings(std::int64_t step, const GuardReading& r) {
  // Implausible readings: said once per sensor, never acted on.
  for (const std::string& what : r.implausible) {
    const std::string key = what.substr(0, what.find(':'));
    bool said = false;
    for (const auto& k : sensors_reported_) said = said || k == key;
    if (said) continue;
    sensors_reported_.push_back(key);
    raise_event(step, "sensor", std::nullopt, std::nullopt, "sensor reading ignored, " + what);
  }
  if (r.throttled && *r.throttled && !throttled_) {
    throttled_ = true;
    raise_event(step, "throttle", std::nullopt, std::nullopt,
                "the device is slowing itself down" + (r.throttle_reasons.empty() ? std::string() : ": " + r.throttle_reasons));
  } else if (r.throttled && !*r.throttled) {
    throttled_ = false;
  }
  if (options_.power_w && r.power_w) {
    if (*r.power_w > *options_.power_w && !power_over_) {
      power_over_ = true;
      raise_event(step, "power", r.power_w, options_.power_w,
                  "draws " + watts(*r.power_w) + ", above guard_power " + watts(*options_.power_w));
    } else if (*r.power_w <= *options_.power_w) {
      power_over_ = false;
    }
  }
}

GuardAction Guard::on_temperature(std::int64_t step, double t, const std::atomic<bool>* interrupt) {
  const double cool = *threshold_ - options_.hysteresis_c;
  if (t < *threshold_) {
    if (t < cool) over_ = false;
    return GuardAction::proceed;
  }
  switch (options_.policy) {
    case GuardPolicy::warn:
      if (!over_) raise_event(step, "warn", t, threshold_, degrees(t) + " reached the threshold " + degrees(*threshold_));
      over_ = true;
      return GuardAction::proceed;
    case GuardPolicy::stop:
      raise_event(step, "stop", t, threshold_, degrees(t) + " reached the threshold " + degrees(*threshold_) + ": stopping");
      return GuardAction::stop;
    case GuardPolicy::pause:
      break;
  }
  pause(step, t, cool, interrupt);
  return GuardAction::proceed;
}

void Guard::pause(std::int64_t step, double t, double cool, const std::atomic<bool>* interrupt) {
  raise_event(step, "pause", t, threshold_,
              degrees(t) + " reached the threshold " + degrees(*threshold_) + ": pausing until below " + degrees(cool));
  const auto start = Clock::now();
  std::optional<double> last = t;
  const std::string ended = wait_until_below(cool, interrupt, last);
  GuardEvent e;
  e.kind = "resume";
  e.step = step;
  e.value = last;
  e.threshold = cool;
  e.paused_s = std::chrono::duration<double>(Clock::now() - start).count();
  e.text = device_ + ": resuming after " + with_unit(e.paused_s, 1, "s") + " (" + ended +
           (last ? ", " + degrees(*last) : std::string()) + ") (step " + std::to_string(step) + ")";
  raise(std::move(e));
  over_ = false;
}

std::string Guard::wait_until_below(double cool, const std::atomic<bool>* interrupt, std::optional<double>& last) {
  std::string ended = "cooled";
  std::unique_lock<std::mutex> lock(mutex_);
  std::uint64_t seen = latest_.sequence;
  for (;;) {
    // Wake for each new sample, and at least every 100 ms for the interrupt flag.
    sampled_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping_ || latest_.sequence != seen; });
    if (interrupt && interrupt->load()) {
      ended = "interrupted";
      break;
    }
    if (stopping_) break;
    if (latest_.sequence == seen) continue;
    seen = latest_.sequence;
    last = latest_.temperature_c;
    if (!last) {
      ended = "the temperature became unreadable";
      break;
    }
    if (*last < cool) break;
  }
  return ended;
}

std::unique_ptr<Guard> make_guard(const Runtime& rt, std::function<void(const GuardEvent&)> on_event) {
  const Config& c = rt.context().config();
  if (*c.guard_interval <= 0) return std::make_unique<Guard>("guard_interval is 0 (" + c.guard_interval.from() + ")");
  if (!*c.sampler) return std::make_unique<Guard>("the sampler is off (" + c.sampler.from() + ")");
  auto monitor = rt.device_handle()->monitor();
  if (!monitor.ok() || !monitor.value())
    return std::make_unique<Guard>(rt.device_handle()->info().id + " has no monitor" +
                                   (monitor.ok() ? std::string() : " (" + monitor.status().message() + ")"));
  GuardOptions o;
  o.interval_s = *c.guard_interval;
  o.policy = *c.guard_policy;
  if (*c.guard_temperature > 0) o.temperature_c = *c.guard_temperature;
  o.hysteresis_c = *c.guard_hysteresis;
  if (*c.guard_power > 0) o.power_w = *c.guard_power;
  o.on_event = std::move(on_event);
  return std::make_unique<Guard>(monitor.value(), std::move(o), rt.device_handle()->info().id);
}

}  // namespace accelkit
