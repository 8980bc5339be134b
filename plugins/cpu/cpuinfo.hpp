// /proc/cpuinfo: vendor, model name and core counts.
#pragma once

#include <string>
#include <string_view>

namespace accelkit::cpu {

struct CpuinfoSummary {
  std::string vendor_id;   // "GenuineIntel"; "" when absent (non-x86)
  std::string model_name;  // first "model name"; "" when absent
  int logical_cores = 0;   // "processor" entries
  int physical_cores = 0;  // distinct ("physical id", "core id") pairs; 0 when not reported
  int sockets = 0;         // distinct "physical id"; 0 when not reported
};

CpuinfoSummary parse_cpuinfo(std::string_view text);

// "GenuineIntel" -> "Intel", "AuthenticAMD" -> "AMD", ...; unknown ids are returned as is.
std::string vendor_name(std::string_view vendor_id);

}  // namespace accelkit::cpu
