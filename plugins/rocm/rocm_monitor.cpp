#include "rocm_monitor.hpp"

#include <cstdlib>
#include <sstream>

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::rocm {

std::optional<double> current_dpm_mhz(std::string_view text) {
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    if (line.find('*') == std::string::npos) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const char* start = line.c_str() + colon + 1;
    char* end = nullptr;
    double mhz = std::strtod(start, &end);
    if (end == start) continue;
    std::string unit = host::trim(std::string_view(end));
    if (host::starts_with(unit, "Mhz") || host::starts_with(unit, "MHz")) return mhz;
    if (host::starts_with(unit, "Ghz") || host::starts_with(unit, "GHz")) return mhz * 1000.0;
  }
  return std::nullopt;
}

RocmMonitor::RocmMonitor(AmdgpuCard card) : card_(std::move(card)) {}

Result<std::vector<Reading>> RocmMonitor::sample() noexcept {
  return guarded("rocm monitor sample", [&] { return sample_unchecked(); });
}

std::vector<Reading> RocmMonitor::sample_unchecked() const {
  std::vector<Reading> out;
  const std::string& dev = card_.device_dir;
  const std::string& hwmon = card_.hwmon_dir;
  auto missing = [](const std::string& path) { return "n/a: cannot read " + path; };

  Reading temp{reading::temperature_c, std::nullopt, "C", "hwmon amdgpu temp1 (edge)", ""};
  if (hwmon.empty()) {
    temp.note = "n/a: no hwmon directory under " + dev;
  } else if (auto milli = host::read_int(hwmon + "/temp1_input")) {
    temp.value = static_cast<double>(*milli) / 1000.0;
  } else {
    temp.note = missing(hwmon + "/temp1_input");
  }
  out.push_back(std::move(temp));
  // amdgpu's edge limit (temp1_crit): the thermal guard's default threshold.
  if (!hwmon.empty())
    if (auto crit = host::read_int(hwmon + "/temp1_crit"); crit && *crit > 0)
      out.push_back({reading::temperature_limit_c, static_cast<double>(*crit) / 1000.0, "C", "hwmon amdgpu temp1_crit", ""});

  Reading power{reading::power_w, std::nullopt, "W", "", ""};
  if (card_.power_file.empty()) {
    power.note = hwmon.empty() ? "n/a: no hwmon directory under " + dev
                               : "n/a: neither power1_average nor power1_input in " + hwmon;
  } else {
    power.source = "hwmon amdgpu " + card_.power_file;
    const std::string path = hwmon + "/" + card_.power_file;
    if (auto micro = host::read_int(path)) power.value = static_cast<double>(*micro) / 1e6;
    else power.note = missing(path);
  }
  out.push_back(std::move(power));
  if (!hwmon.empty())
    if (auto cap = host::read_int(hwmon + "/power1_cap"); cap && *cap > 0)
      out.push_back({reading::power_limit_w, static_cast<double>(*cap) / 1e6, "W", "hwmon amdgpu power1_cap", ""});

  Reading util{reading::utilisation_pct, std::nullopt, "%", "amdgpu gpu_busy_percent", ""};
  if (auto busy = host::read_int(dev + "/gpu_busy_percent")) util.value = static_cast<double>(*busy);
  else util.note = missing(dev + "/gpu_busy_percent");
  out.push_back(std::move(util));

  Reading used{reading::memory_used_bytes, std::nullopt, "bytes", "amdgpu mem_info_vram_used", ""};
  Reading total{reading::memory_total_bytes, std::nullopt, "bytes", "amdgpu mem_info_vram_total", ""};
  const VramReading vram = read_vram(card_);
  if (vram.used) used.value = static_cast<double>(*vram.used);
  else used.note = missing(vram.used_path);
  if (vram.total) total.value = static_cast<double>(*vram.total);
  else total.note = missing(vram.total_path);
  out.push_back(std::move(used));
  out.push_back(std::move(total));

  for (auto [key, file] : {std::pair{reading::clock_mhz, "pp_dpm_sclk"}, std::pair{reading::memory_clock_mhz, "pp_dpm_mclk"}}) {
    Reading clock{key, std::nullopt, "MHz", std::string("amdgpu ") + file, ""};
    const std::string path = dev + "/" + file;
    if (auto read = host::read_file(path); read.ok()) {
      clock.value = current_dpm_mhz(read.text);
      if (!clock.value) clock.note = "n/a: no current level ('*') in " + path;
    } else {
      clock.note = missing(path);
    }
    out.push_back(std::move(clock));
  }
  return out;
}

}  // namespace accelkit::rocm
