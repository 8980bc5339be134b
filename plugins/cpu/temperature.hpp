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

// Where the CPU starts to protect itself: the lowest temp<N>_max (else temp<N>_crit) beside the
// source's hwmon inputs, in C, with the file it came from. nullopt for thermal zones and for
// chips that publish neither (k10temp usually does not).
struct TemperatureLimit {
  double celsius = 0;
  std::string source;  // "hwmon coretemp temp1_max"
};
std::optional<TemperatureLimit> read_temperature_limit(const TemperatureSource& source, const host::FileReader& read);

}  // namespace accelkit::cpu
