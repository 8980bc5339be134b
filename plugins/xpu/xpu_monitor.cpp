#include "xpu_monitor.hpp"

#include "sysfs_value.hpp"

namespace accelkit::xpu {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The figure's note: the problem reading it when there was one, else why it is absent.
std::string absent(const std::string& problem, const std::string& otherwise) {
  return problem.empty() ? otherwise : "n/a: " + problem;
}

}  // namespace

XpuMonitor::XpuMonitor(XpuGpu gpu, std::shared_ptr<const SysmanApi> sysman)
    : gpu_(std::move(gpu)), sysman_(std::move(sysman)) {}

Result<std::vector<Reading>> XpuMonitor::sample() noexcept {
  return guarded("xpu monitor sample", [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    return sample_unchecked();
  });
}

Reading XpuMonitor::power(const std::optional<Energy>& now, const std::string& source, const std::string& missing) {
  Reading p{reading::power_w, std::nullopt, "W", source, ""};
  if (!now) {
    p.note = missing;
    last_.reset();
    return p;
  }
  if (!last_) p.note = "n/a: the first energy reading (power needs two)";
  else if (now->joules < last_->joules || now->seconds <= last_->seconds)
    p.note = "n/a: the energy counter went backwards (wrapped or reset) since the last sample";
  else
    p.value = (now->joules - last_->joules) / (now->seconds - last_->seconds);
  last_ = now;
  return p;
}

namespace {

Reading temperature(const IntelCard* card, const std::optional<SysmanReading>& zes) {
  Reading temp{reading::temperature_c, std::nullopt, "C", "", ""};
  if (card && !card->temp_file.empty()) {
    const std::string path = card->hwmon_dir + "/" + card->temp_file;
    std::string problem;
    temp.source = card->driver + " hwmon " + card->temp_file;
    if (auto milli = read_signed(path, &problem)) temp.value = static_cast<double>(*milli) / 1000.0;
    else temp.note = absent(problem, "n/a: cannot read " + path);
  } else if (zes && zes->temperature_c) {
    temp.source = "Level Zero Sysman (hottest sensor)";
    temp.value = zes->temperature_c;
  } else {
    temp.note = std::string("n/a: ") +
                (card && card->driver == "i915" ? "i915's hwmon has no temperature" : "no temperature file") +
                (zes ? " and Sysman has no temperature sensor" : " and Level Zero Sysman is not loaded");
  }
  return temp;
}

Reading clock(const IntelCard* card, const std::optional<SysmanReading>& zes) {
  Reading clock{reading::clock_mhz, std::nullopt, "MHz", "", ""};
  if (card && !card->freq_file.empty()) {
    std::string problem;
    clock.source = card->driver + " " + card->freq_file.substr(card->card_dir.size() + 1);
    if (auto mhz = read_count(card->freq_file, &problem)) clock.value = static_cast<double>(*mhz);
    else clock.note = absent(problem, "n/a: cannot read " + card->freq_file);
  } else if (zes && zes->frequency_mhz) {
    clock.source = "Level Zero Sysman GPU frequency";
    clock.value = zes->frequency_mhz;
  } else {
    clock.note = "n/a: no frequency file and no Sysman GPU frequency domain";
  }
  return clock;
}

// memory_used_bytes and memory_total_bytes, device-wide.
std::pair<Reading, Reading> memory(const XpuGpu& gpu, const std::optional<SysmanReading>& zes) {
  Reading used{reading::memory_used_bytes, std::nullopt, "bytes", "", ""};
  Reading total{reading::memory_total_bytes, std::nullopt, "bytes", "", ""};
  const LmemReading lmem = gpu.card ? read_lmem(*gpu.card) : LmemReading{};
  if (lmem.total && lmem.available) {
    used.source = total.source = gpu.card->driver + " " + lmem.source;
    used.value = static_cast<double>(*lmem.total - *lmem.available);
    total.value = static_cast<double>(*lmem.total);
  } else if (zes && zes->memory_size) {
    used.source = total.source = "Level Zero Sysman memory modules";
    used.value = static_cast<double>(*zes->memory_size - *zes->memory_free);
    total.value = static_cast<double>(*zes->memory_size);
  } else {
    used.note = total.note = gpu.integrated()
                                 ? "n/a: an integrated GPU (host memory)"
                                 : absent(lmem.problem, "n/a: no local-memory figures from the driver or Sysman");
  }
  return {std::move(used), std::move(total)};
}

}  // namespace

std::vector<Reading> XpuMonitor::sample_unchecked() {
  std::vector<Reading> out;
  const IntelCard* card = gpu_.card ? &*gpu_.card : nullptr;
  std::optional<SysmanReading> zes;
  if (sysman_ && gpu_.ze) zes = read_sysman(*sysman_, gpu_.ze->handle);
  out.push_back(temperature(card, zes));

  std::optional<Energy> energy;
  std::string problem, source, missing = "n/a: no energy counter (hwmon energy1_input or Sysman)";
  if (card && !card->energy_file.empty()) {
    const std::string path = card->hwmon_dir + "/" + card->energy_file;
    source = card->driver + " hwmon " + card->energy_file + " (between samples)";
    if (auto uj = read_count(path, &problem)) energy = Energy{static_cast<double>(*uj) / 1e6, now_seconds()};
    else missing = absent(problem, "n/a: cannot read " + path);
  } else if (zes && zes->energy) {
    source = "Level Zero Sysman energy counter (between samples)";
    energy = Energy{static_cast<double>(zes->energy->energy) / 1e6, static_cast<double>(zes->energy->timestamp) / 1e6};
  }
  out.push_back(power(energy, source, missing));
  if (card && !card->power_limit_file.empty())
    if (auto uw = read_count(card->hwmon_dir + "/" + card->power_limit_file, &problem); uw && *uw > 0)
      out.push_back({reading::power_limit_w, static_cast<double>(*uw) / 1e6, "W", card->driver + " hwmon power1_max (PL1)", ""});

  out.push_back(clock(card, zes));
  auto [used, total] = memory(gpu_, zes);
  out.push_back(std::move(used));
  out.push_back(std::move(total));
  return out;
}

}  // namespace accelkit::xpu
