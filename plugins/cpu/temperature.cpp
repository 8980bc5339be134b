#include "temperature.hpp"

#include <algorithm>

#include <accelkit/sdk/host_paths.hpp>

namespace accelkit::cpu {
namespace {

using host::starts_with;

struct Labeled {
  std::string label;  // "" when the sensor has no _label file
  std::string input;
};

// temp<N>_input files of a hwmon directory with their labels.
std::vector<Labeled> temp_inputs(const host::FileReader& read, const std::string& dir) {
  std::vector<Labeled> out;
  for (const std::string& name : host::list_dir(dir)) {
    if (!starts_with(name, "temp") || name.size() < 11 ||
        name.compare(name.size() - 6, 6, "_input") != 0)
      continue;
    std::string stem = name.substr(0, name.size() - 6);  // temp3
    out.push_back({host::read_line(read, dir + "/" + stem + "_label").value_or(""), dir + "/" + name});
  }
  return out;
}

// One hwmon chip's choice, with a rank (lower is better) to pick among chips.
struct Candidate {
  int rank = 99;
  std::string chip;
  std::vector<Labeled> sensors;
};

std::optional<Candidate> from_hwmon(const host::FileReader& read, const std::string& dir,
                                    const std::string& chip) {
  std::vector<Labeled> inputs = temp_inputs(read, dir);
  if (inputs.empty()) return std::nullopt;
  auto with_prefix = [&](std::string_view prefix) {
    std::vector<Labeled> v;
    for (const auto& l : inputs)
      if (starts_with(l.label, prefix)) v.push_back(l);
    return v;
  };
  if (chip == "k10temp" || chip == "zenpower") {
    // Tccd = die temperature per chiplet; Tctl carries a fan-control offset on some parts.
    int rank = 0;
    for (const char* prefix : {"Tccd", "Tdie", "Tctl"}) {
      if (auto v = with_prefix(prefix); !v.empty()) return Candidate{rank, chip, v};
      ++rank;
    }
    return Candidate{rank, chip, {inputs.front()}};
  }
  if (chip == "coretemp") {
    if (auto v = with_prefix("Package id"); !v.empty()) return Candidate{0, chip, v};
    if (auto v = with_prefix("Core"); !v.empty()) return Candidate{1, chip, v};
    return Candidate{2, chip, {inputs.front()}};
  }
  return std::nullopt;
}

}  // namespace

std::optional<TemperatureSource> find_temperature_source(const host::FileReader& read) {
  // hwmon: coretemp reports one chip per socket, so chips of one kind and rank are merged.
  const std::string hwmon = sysfs_path("class/hwmon");
  std::optional<Candidate> best;
  for (const std::string& name : host::list_dir(hwmon)) {
    std::string dir = hwmon + "/" + name;
    auto chip = host::read_line(read, dir + "/name");
    if (!chip) {  // kernels before 3.15 kept the attributes under device/
      dir += "/device";
      chip = host::read_line(read, dir + "/name");
    }
    if (!chip) continue;
    auto c = from_hwmon(read, dir, *chip);
    if (!c) continue;
    if (!best || c->rank < best->rank) {
      best = std::move(c);
    } else if (c->rank == best->rank && c->chip == best->chip) {
      for (auto& l : c->sensors) best->sensors.push_back(std::move(l));
    }
  }
  if (best) {
    TemperatureSource src;
    src.description = "hwmon " + best->chip;
    std::sort(best->sensors.begin(), best->sensors.end(), [](const Labeled& a, const Labeled& b) {
      return a.label.size() != b.label.size() ? a.label.size() < b.label.size() : a.label < b.label;
    });  // Tccd2 before Tccd10
    std::string labels;
    for (const auto& l : best->sensors) {
      src.inputs.push_back(l.input);
      if (!l.label.empty()) labels += (labels.empty() ? " " : ",") + l.label;
    }
    src.description += labels;
    return src;
  }

  const std::string thermal = sysfs_path("class/thermal");
  TemperatureSource zones;
  for (const std::string& name : host::list_dir(thermal)) {
    if (!starts_with(name, "thermal_zone")) continue;
    const std::string dir = thermal + "/" + name;
    if (host::read_line(read, dir + "/type").value_or("") == "x86_pkg_temp")
      zones.inputs.push_back(dir + "/temp");
  }
  if (zones.inputs.empty()) return std::nullopt;
  zones.description = "thermal_zone x86_pkg_temp";
  return zones;
}

TemperatureValue read_temperature(const TemperatureSource& source, const host::FileReader& read) {
  TemperatureValue out;
  for (const std::string& path : source.inputs) {
    host::ReadResult r = read(path);
    if (!r.ok()) {
      out.error = "cannot read " + path + ": " + host::failure(r);  // kept when no input gives a value
      continue;
    }
    auto milli = host::parse_int(r.text);
    if (!milli) continue;
    double c = static_cast<double>(*milli) / 1000.0;
    if (!out.celsius || c > *out.celsius) out.celsius = c;
  }
  if (out.celsius) out.error.clear();
  else if (out.error.empty()) out.error = "no value in " + source.description;
  return out;
}

std::optional<TemperatureLimit> read_temperature_limit(const TemperatureSource& source, const host::FileReader& read) {
  std::optional<TemperatureLimit> out;
  for (const std::string& input : source.inputs) {
    // .../hwmonN/tempK_input -> .../hwmonN/tempK_max, _crit
    if (input.size() < 6 || input.compare(input.size() - 6, 6, "_input") != 0) continue;
    const std::string stem = input.substr(0, input.size() - 6);
    for (const char* kind : {"_max", "_crit"}) {
      auto milli = host::read_int(read, stem + kind);
      if (!milli || *milli <= 0) continue;
      const double c = static_cast<double>(*milli) / 1000.0;
      if (!out || c < out->celsius) {
        const auto slash = stem.rfind('/');
        out = TemperatureLimit{c, source.description.substr(0, source.description.find(' ', 6)) + " " +
                                      stem.substr(slash == std::string::npos ? 0 : slash + 1) + kind};
      }
      break;  // _max when there is one: the lower, where the CPU starts to throttle
    }
  }
  return out;
}

}  // namespace accelkit::cpu
