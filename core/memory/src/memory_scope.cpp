#include "accelkit/memory_scope.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <vector>

#include "accelkit/runtime.hpp"

namespace accelkit {

struct MemoryScope::State {
  std::shared_ptr<Device> device;
  MemoryReport report;
  std::uint64_t folded_peak = 0;  // peaks read before a nested scope reset the device's
  bool stopped = false;
};

namespace {

// Open scopes, for folding the device's peak into them before a nested scope resets it.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<MemoryScope::State*>& open_scopes() {
  static std::vector<MemoryScope::State*> v;
  return v;
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string MemoryReport::summary() const {
  std::string out = (name.empty() ? std::string("memory") : name) + " on " + device + ": ";
  if (!measured) return out + "not measured (" + note + ")";
  const std::int64_t d = delta();
  out += "peak +" + format_bytes(peak_over_start()) + " over the start (" + format_bytes(peak) + " in use at most), " +
         (d < 0 ? "-" : "+") + format_bytes(static_cast<std::uint64_t>(d < 0 ? -d : d)) + " at the end";
  if (!peak_measured) out += " (no peak from the device: the larger of start and end)";
  return out + " [" + source + "]";
}

MemoryScope::MemoryScope(const Runtime& rt, std::string name) : MemoryScope(rt.device_handle(), std::move(name)) {}

MemoryScope::MemoryScope(std::shared_ptr<Device> device, std::string name) : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.device = std::move(device);
  s.report.name = std::move(name);
  if (!s.device) {
    s.report.note = "no device";
    s.stopped = true;
    return;
  }
  s.report.device = s.device->info().id;
  std::lock_guard<std::mutex> lock(registry_mutex());
  Result<MemoryStats> before = s.device->memory();
  if (!before.ok() || !before.value().in_use) {
    s.report.note = before.ok() ? "the device's plugin reports no memory in use" : before.status().message();
    s.stopped = true;
    return;
  }
  // The peak so far belongs to every scope already open on this device: fold it in first.
  if (before.value().peak)
    for (State* open : open_scopes())
      if (open->device.get() == s.device.get()) open->folded_peak = std::max(open->folded_peak, *before.value().peak);
  const Status reset = s.device->reset_peak_memory();
  s.report.measured = true;
  s.report.peak_measured = reset.is_ok() && before.value().peak.has_value();
  s.report.source = before.value().source;
  s.report.note = reset.is_ok() ? before.value().note : before.value().note + "; " + reset.message();
  Result<MemoryStats> now = s.device->memory();  // in use after the reset call itself
  s.report.start = now.ok() && now.value().in_use ? *now.value().in_use : *before.value().in_use;
  s.report.end = s.report.peak = s.report.start;
  open_scopes().push_back(&s);
}

namespace {

void refresh(MemoryScope::State& s) {
  if (s.stopped || !s.report.measured) return;
  Result<MemoryStats> now = s.device->memory();
  if (!now.ok() || !now.value().in_use) return;
  s.report.end = *now.value().in_use;
  std::uint64_t peak = std::max({s.report.peak, s.report.end, s.folded_peak});
  if (s.report.peak_measured && now.value().peak) peak = std::max(peak, *now.value().peak);
  s.report.peak = peak;
}

}  // namespace

MemoryReport MemoryScope::report() const {
  std::lock_guard<std::mutex> lock(registry_mutex());
  refresh(*state_);
  return state_->report;
}

MemoryReport MemoryScope::stop() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  State& s = *state_;
  refresh(s);
  if (!s.stopped) {
    s.stopped = true;
    auto& open = open_scopes();
    open.erase(std::remove(open.begin(), open.end(), &s), open.end());
  }
  return s.report;
}

MemoryScope::~MemoryScope() {
  if (state_) stop();
}

}  // namespace accelkit
