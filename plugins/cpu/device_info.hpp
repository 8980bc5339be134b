// Turns a CpuProbe into what the host shows: the one DeviceInfo ("cpu:0"), a score and reasons.
#pragma once

#include <string>
#include <vector>

#include <accelkit/sdk/device.hpp>

#include "probe.hpp"

namespace accelkit::cpu {

inline constexpr int kCpuScore = 10;  // the CPU is always usable

struct CpuReport {
  int score = 0;
  DeviceInfo device;
  std::vector<std::string> reasons;
  std::vector<std::string> warnings;
};

CpuReport make_cpu_report(const CpuProbe& probe);

// "AMX-BF16", "AVX512_BF16" or "" : what makes bf16 fast here.
std::string bf16_source(const IsaFlags& isa);

}  // namespace accelkit::cpu
