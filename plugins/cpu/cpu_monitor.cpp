#include "cpu_monitor.hpp"

#include <accelkit/sdk/host_paths.hpp>

#include "meminfo.hpp"

namespace accelkit::cpu {
namespace {
host::FileReader or_default(host::FileReader read) { return read ? std::move(read) : host::FileReader(host::read_file); }
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

  Reading temp{reading::temperature_c, std::nullopt, "C", "", ""};
  if (temperature_) {
    temp.source = temperature_->description;
    TemperatureValue v = read_temperature(*temperature_, read_);
    temp.value = v.celsius;
    if (!v.celsius) temp.note = "n/a: " + v.error;
  } else {
    temp.note = "n/a: no hwmon temperature sensor (k10temp, zenpower, coretemp) and no "
                "x86_pkg_temp thermal zone";
  }
  out.push_back(std::move(temp));
  if (temperature_)
    if (auto limit = read_temperature_limit(*temperature_, read_))
      out.push_back({reading::temperature_limit_c, limit->celsius, "C", limit->source, ""});

  if (!throttle_counters_.empty()) {
    // The kernel counts each time a core or package throttled itself for heat: throttled when
    // a count moved since the previous sample.
    Reading throttled{reading::throttled, std::nullopt, "bool", "thermal_throttle counters", ""};
    std::int64_t total = 0;
    bool all = true;
    for (const std::string& path : throttle_counters_) {
      auto n = host::read_int(read_, path);
      if (n) total += *n;
      else all = false;
    }
    if (!all) {
      throttled.note = "n/a: a thermal_throttle counter became unreadable";
      previous_throttles_.reset();
    } else {
      if (!previous_throttles_)
        throttled.note = "n/a: first sample (throttling is the counters' change between samples)";
      else if (total < *previous_throttles_)
        throttled.note = "n/a: the thermal_throttle counters went back (reset)";
      else {
        throttled.value = total > *previous_throttles_ ? 1.0 : 0.0;
        if (total > *previous_throttles_)
          throttled.note = "thermal throttling: " + std::to_string(total - *previous_throttles_) +
                           " events since the previous sample";
      }
      previous_throttles_ = total;
    }
    out.push_back(std::move(throttled));
  }

  Reading power{reading::power_w, std::nullopt, "W", "", ""};
  if (!rapl_.empty()) power.source = rapl_.source();
  RaplMeter::Sample p = rapl_.read(now);
  power.value = p.watts;
  power.note = p.note;
  out.push_back(std::move(power));
  if (!rapl_.empty()) {
    if (auto limit = rapl_.power_limit_w())
      out.push_back({reading::power_limit_w, limit, "W", rapl_.source() + " constraint_0", ""});
  }

  Reading util{reading::utilisation_pct, std::nullopt, "%", "/proc/stat", ""};
  const std::string stat_path = procfs_path("stat");
  host::ReadResult stat = read_(stat_path);
  std::optional<CpuTicks> ticks = stat.ok() ? parse_proc_stat(stat.text) : std::nullopt;
  if (!ticks) {
    util.note = stat.ok() ? "n/a: no aggregate cpu line in " + stat_path
                          : "n/a: cannot read " + stat_path + ": " + host::failure(stat);
  } else if (!previous_ticks_) {
    util.note = "n/a: first sample (utilisation is the tick delta between samples)";
  } else {
    util.value = utilisation_pct(*previous_ticks_, *ticks);
    if (!util.value) util.note = "n/a: no CPU ticks elapsed since the previous sample";
  }
  previous_ticks_ = ticks;
  out.push_back(std::move(util));

  Reading used{reading::memory_used_bytes, std::nullopt, "bytes", "/proc/meminfo", ""};
  Reading total{reading::memory_total_bytes, std::nullopt, "bytes", "/proc/meminfo", ""};
  const std::string meminfo_path = procfs_path("meminfo");
  host::ReadResult mem = read_(meminfo_path);
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
  return out;
}

}  // namespace accelkit::cpu
