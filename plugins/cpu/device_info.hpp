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

// The quantized engine int8 Linear runs on, from LibTorch's engines (lower-cased), and whether
// activations must keep 7 bits. engine "" = none usable; `why` says which either way.
struct Int8Choice {
  std::string engine;
  bool reduce_range = false;
  std::string why;
};
Int8Choice choose_int8(const std::vector<std::string>& engines, const IsaFlags& isa);

// "AMX-BF16", "AVX512_BF16" or "" : what makes bf16 fast here.
std::string bf16_source(const IsaFlags& isa);

}  // namespace accelkit::cpu
