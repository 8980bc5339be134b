#include "cpu_monitor.hpp"

#include <accelkit/sdk/host_paths.hpp>

#include "meminfo.hpp"

namespace accelkit::cpu {
namespace {
host::FileReader or_default(host::FileReader read) { return read ? std::move(read) : host::FileReader(host::read_file); }

// The temperature, then where the CPU starts to protect itself from heat when the sensor says.
void add_temperature(std::vector<Reading>& out, const std::optional<TemperatureSource>& source,
                     const host::FileReader& read) {
  Reading temp{reading::temperature_c, std::nullopt, "C", "", ""};
  if (source) {
    temp.source = source->description;
    TemperatureValue v = read_temperature(*source, read);
    temp.value = v.celsius;
    if (!v.celsius) temp.note = "n/a: " + v.error;
  } else {
    temp.note = "n/a: no hwmon temperature sensor (k10temp, zenpower, coretemp) and no "
                "x86_pkg_temp thermal zone";
  }
  out.push_back(std::move(temp));
  if (source)
    if (auto limit = read_temperature_limit(*source, read))
      out.push_back({reading::temperature_limit_c, limit->celsius, "C", limit->source, ""});
}

// The kernel counts each time a core or package throttled itself for heat: throttled when a
// count moved since the previous sample. `previous` is the counters' sum at that sample.
Reading throttle_reading(const std::vector<std::string>& counters, const host::FileReader& read,
                         std::optional<std::int64_t>& previous) {
  Reading throttled{reading::throttled, std::nullopt, "bool", "thermal_throttle counters", ""};
  std::int64_t total = 0;
  bool all = true;
  for (const std::string& path : counters) {
    auto n = host::read_int(read, path);
    if (n) total += *n;
    else all = false;
  }
  if (!all) {
    throttled.note = "n/a: a thermal_throttle counter became unreadable";
    previous.reset();
    return throttled;
  }
  if (!previous)
    throttled.note = "n/a: first sample (throttling is the counters' change between samples)";
  else if (total < *previous)
    throttled.note = "n/a: the thermal_throttle counters went back (reset)";
  else {
    throttled.value = total > *previous ? 1.0 : 0.0;
    if (total > *previous)
      throttled.note = "thermal throttling: " + std::to_string(total - *previous) + " events since the previous sample";
  }
  previous = total;
  return throttled;
}

// Package power since the previous sample, then the package's power limit where RAPL has one.
void add_power(std::vector<Reading>& out, RaplMeter& rapl, CpuMonitor::Clock::time_point now) {
  Reading power{reading::power_w, std::nullopt, "W", "", ""};
  if (!rapl.empty()) power.source = rapl.source();
  RaplMeter::Sample p = rapl.read(now);
  power.value = p.watts;
  power.note = p.note;
  out.push_back(std::move(power));
  if (!rapl.empty()) {
    if (auto limit = rapl.power_limit_w())
      out.push_back({reading::power_limit_w, limit, "W", rapl.source() + " constraint_0", ""});
  }
}

// Utilisation from /proc/stat's tick counters since the previous sample (kept in `previous`).
Reading utilisation_reading(const host::FileReader& read, std::optional<CpuTicks>& previous) {
  Reading util{reading::utilisation_pct, std::nullopt, "%", "/proc/stat", ""};
  const std::string stat_path = procfs_path("stat");
  host::ReadResult stat = read(stat_path);
  std::optional<CpuTicks> ticks = stat.ok() ? parse_proc_stat(stat.text) : std::nullopt;
  if (!ticks) {
    util.note = stat.ok() ? "n/a: no aggregate cpu line in " + stat_path
                          : "n/a: cannot read " + stat_path + ": " + host::failure(stat);
  } else if (!previous) {
    util.note = "n/a: first sample (utilisation is the tick delta between samples)";
  } else {
    util.value = utilisation_pct(*previous, *ticks);
    if (!util.value) util.note = "n/a: no CPU ticks elapsed since the previous sample";
  }
  previous = ticks;
  return util;
}

// Memory used and total from /proc/meminfo.
void add_memory(std::vector<Reading>& out, const host::FileReader& read) {
  Reading used{reading::memory_used_bytes, std::nullopt, "bytes", "/proc/meminfo", ""};
  Reading total{reading::memory_total_bytes, std::nullopt, "bytes", "/proc/meminfo", ""};
  const std::string meminfo_path = procfs_path("meminfo");
  host::ReadResult mem = read(meminfo_path);
  MemInfo m = mem.ok() ? parse_meminfo(mem.text) : MemInfo{};
  if (m.total_bytes > 0) {
    total.value = static_cast<double>(m.total_bytes);
    if (m.available_bytes && *m.available_bytes <= m.total_bytes)
      used.value = static_cast<double>(m.total_bytes - *m.available_bytes);
    else
      used.note = "n/a: no MemAvailable/MemFree in " + meminfo_path;
  } else {
    std::string why = !mem.ok()              ? "n/a: cannot read " + meminfo_path + ": " + host::failure(mem)
                      : !m.implausible.empty() ? m.implausible + " in " + meminfo_path
                                               : "n/a: no MemTotal in " + meminfo_path;
    used.note = total.note = why;
  }
  out.push_back(std::move(used));
  out.push_back(std::move(total));
}
}  // namespace

CpuMonitor::CpuMonitor(host::FileReader read)
    : read_(or_default(std::move(read))),
      temperature_(find_temperature_source(read_)),
      rapl_(find_rapl_domains(read_), read_) {
  const std::string cpus = sysfs_path("devices/system/cpu");
  for (const std::string& name : host::list_dir(cpus)) {
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0 || name.find_first_not_of("0123456789", 3) != std::string::npos)
      continue;
    for (const char* counter : {"core_throttle_count", "package_throttle_count"}) {
      const std::string path = cpus + "/" + name + "/thermal_throttle/" + counter;
      if (host::read_int(read_, path)) throttle_counters_.push_back(path);
    }
  }
}

Result<std::vector<Reading>> CpuMonitor::sample() noexcept {
  return sample_at(Clock::now());
}

Result<std::vector<Reading>> CpuMonitor::sample_at(Clock::time_point now) noexcept {
  return guarded("cpu monitor sample", [&] { return sample_unchecked(now); });
}

std::vector<Reading> CpuMonitor::sample_unchecked(Clock::time_point now) {
  std::vector<Reading> out;
  add_temperature(out, temperature_, read_);
  if (!throttle_counters_.empty()) out.push_back(throttle_reading(throttle_counters_, read_, previous_throttles_));
  add_power(out, rapl_, now);
  out.push_back(utilisation_reading(read_, previous_ticks_));
  add_memory(out, read_);
  return out;
}

}  // namespace accelkit::cpu
