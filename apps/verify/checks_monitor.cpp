// The claimed sensors, sampled twice around some work, and the memory figures moving with an
// allocation.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "accelkit/device_sync.hpp"
#include "accelkit/sdk/monitor.hpp"
#include "accelkit/sdk/support/plausible.hpp"
#include "check_util.hpp"

namespace accelkit::conformance::detail {
namespace {

struct Sensor {
  Capability cap;
  const char* key;
  double lo;  // exclusive when lo_open
  bool lo_open;
  double hi;
  bool rate;  // a rate (n/a on a first sample)
  const char* why;
};

// What a running device reads. Tighter than the host's physical screen (plausible.hpp) where
// a value that is physically possible still means a broken sensor: a powered chip is above
// 0 C and draws power.
constexpr Sensor kSensors[] = {
    {Capability::thermal, reading::temperature_c, 0, true, 150, false,
     "a running chip is above 0 C and below 150 C, where silicon fails; a stuck or absent sensor reads 0"},
    {Capability::power, reading::power_w, 0, true, 2000, true,
     "a running device draws power; the largest accelerators draw ~1.2 kW"},
    {Capability::utilisation, reading::utilisation_pct, 0, false, 100, true, "a percentage"},
};

const Reading* find(const std::vector<Reading>& rs, const char* key) {
  for (const auto& r : rs)
    if (r.key == key) return &r;
  return nullptr;
}

// memory(): in_use grows by most of a 64 MiB allocation, and peak is never below in_use. The
// allocator's cache is emptied first, so the allocation takes fresh memory (on a CPU, glibc's
// malloc may keep freed memory resident for reuse: malloc_reuse).
void check_memory_stats(const Run& run) {
  run.check("memory_stats", "memory() moves with a 64 MiB allocation", [&]() -> CheckResult {
    (void)run.device.empty_cache();  // not_supported: no cache to empty
    auto before = run.device.memory();
    if (!before.ok()) return fail("claimed, but memory() says: " + before.status().message());
    if (!before.value().in_use) return fail("claimed, but memory() has no in_use figure (" + before.value().source + ")");
    constexpr std::int64_t kBytes = std::int64_t{64} << 20;
    auto t = at::empty({kBytes / 4}, at::TensorOptions().device(run.dev).dtype(at::kFloat));
    t.fill_(1.0f);  // touch every page
    accelkit::detail::synchronize(run.dev);
    auto after = run.device.memory();
    if (!after.ok() || !after.value().in_use) return fail("memory() failed after the allocation");
    const double moved = double(*after.value().in_use) - double(*before.value().in_use);
    const double mib = moved / double(1 << 20);
    // 3/4 of it: page accounting and allocator rounding never hide a quarter of 64 MiB.
    if (moved < 0.75 * double(kBytes))
      return fail("in_use moved by " + num(mib) + " MiB after allocating 64 MiB (" + after.value().source + ")", mib, 48.0);
    if (after.value().peak && *after.value().peak < *after.value().in_use)
      return fail("peak " + num(double(*after.value().peak) / (1 << 20)) + " MiB is below in_use " +
                  num(double(*after.value().in_use) / (1 << 20)) + " MiB");
    return pass("in_use +" + num(mib) + " MiB for 64 MiB allocated (at least 48 expected; " + after.value().source + ")",
                mib, 48.0);
  });
}

// Two samples of the device's monitor with some work between them; `error` says why there
// are none.
struct SensorSamples {
  std::vector<Reading> first, second;
  std::string error;
};

SensorSamples sample_around_work(const Run& run) {
  SensorSamples out;
  auto monitor = run.device.monitor();
  if (!monitor.ok()) {
    out.error = "claimed, but monitor() says: " + monitor.status().message();
    return out;
  }
  auto a = monitor.value()->sample();
  // Some work between the samples, so rates have something to show.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(run.options.quick ? 200 : 500);
  auto x = run.randn({256, 256});
  while (std::chrono::steady_clock::now() < until) x = at::tanh(at::matmul(x, x) * 1e-3);
  accelkit::detail::synchronize(run.dev);
  auto b = monitor.value()->sample();
  if (!a.ok() || !b.ok()) out.error = "sample() failed: " + (a.ok() ? b.status() : a.status()).message();
  else {
    out.first = a.value();
    out.second = b.value();
  }
  return out;
}

// Every value of both samples is physically possible for its unit, and memory used never
// exceeds memory total.
void check_samples_plausible(const Run& run, const SensorSamples& samples) {
  run.check("monitor", "every reading of both samples physically plausible", [&]() -> CheckResult {
    int values = 0;
    for (const auto* rs : {&samples.first, &samples.second}) {
      for (const auto& r : *rs) {
        if (!r.value) continue;
        ++values;
        const std::string why = plausible::check(*r.value, r.unit);
        if (!why.empty()) return fail(r.key + " " + why + " (source " + r.source + ")");
      }
      const Reading *used = find(*rs, reading::memory_used_bytes), *total = find(*rs, reading::memory_total_bytes);
      if (used && total && used->value && total->value && *used->value > *total->value)
        return fail("memory_used_bytes " + num(*used->value) + " exceeds memory_total_bytes " + num(*total->value));
    }
    return pass(std::to_string(values) + " values within what each unit can physically be (plausible.hpp); no reading "
                "in the contract is a counter (plugins turn theirs into rates), so none is checked for monotony");
  });
}

// One claimed sensor: present in both samples (a rate from the second on) and within its range.
void check_claimed_sensor(const Run& run, const Sensor& s, const SensorSamples& samples) {
  run.check(to_string(s.cap).data(), std::string(s.key) + " sampled twice", [&]() -> CheckResult {
    if (!samples.error.empty()) return fail(samples.error);
    std::string d;
    for (const auto* rs : {&samples.first, &samples.second}) {
      const Reading* r = find(*rs, s.key);
      const bool is_first = rs == &samples.first;
      if (!r || !r->value) {
        if (is_first && s.rate) continue;  // rates start on the second sample
        return fail(std::string("claimed, but ") + s.key + " is " + (r ? "n/a: " + r->note : "missing") + " in the " +
                    (is_first ? "first" : "second") + " sample");
      }
      const double v = *r->value;
      const bool ok = (s.lo_open ? v > s.lo : v >= s.lo) && v <= s.hi;
      d += (d.empty() ? "" : ", ") + num(v) + " " + r->unit;
      if (!ok)
        return fail(std::string(s.key) + " reads " + num(v) + " " + r->unit + " in the " + (is_first ? "first" : "second") +
                        " sample, outside " + (s.lo_open ? "(" : "[") + num(s.lo) + ", " + num(s.hi) + "] (" + s.why + ")",
                    v);
    }
    const Reading* last = find(samples.second, s.key);
    return pass(d + " (" + s.why + "; source " + (last ? last->source : "?") + ")");
  });
}

}  // namespace

void check_sensors(const Run& run) {
  if (run.claims(Capability::memory_stats)) check_memory_stats(run);
  bool any = false;
  for (const auto& s : kSensors) any = any || run.claims(s.cap);
  if (!any) return;
  const SensorSamples samples = sample_around_work(run);
  if (samples.error.empty()) check_samples_plausible(run, samples);
  for (const auto& s : kSensors)
    if (run.claims(s.cap)) check_claimed_sensor(run, s, samples);
}

}  // namespace accelkit::conformance::detail
