// Where the CPU temperature comes from: hwmon (k10temp, zenpower, coretemp) or the thermal
// zone of type x86_pkg_temp. Found once; read on each sample.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::cpu {

struct TemperatureSource {
  std::vector<std::string> inputs;  // millidegree files; the reading is their maximum
  std::string description;          // "hwmon k10temp Tccd1,Tccd2", "thermal_zone x86_pkg_temp"
};

// Chooses, in order: k10temp/zenpower Tccd* (max) > Tdie > Tctl; coretemp "Package id N"
// (max over sockets) > its cores; then thermal zones of type x86_pkg_temp. nullopt = none.
std::optional<TemperatureSource> find_temperature_source(const host::FileReader& read);

// Degrees Celsius from the source's inputs, or an error text ("cannot read ...: ...").
struct TemperatureValue {
  std::optional<double> celsius;
  std::string error;
};
TemperatureValue read_temperature(const TemperatureSource& source, const host::FileReader& read);

}  // namespace accelkit::cpu
