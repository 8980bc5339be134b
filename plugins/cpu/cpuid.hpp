// Raw cpuid/XGETBV reads of the running CPU (zeros on non-x86 builds).
#pragma once

#include <cstdint>
#include <string>

#include "isa.hpp"

namespace accelkit::cpu {

// Everything the probe takes from cpuid; a test builds one from recorded values.
struct CpuidSnapshot {
  CpuidLeaves leaves;
  std::uint64_t xcr0 = 0;
  std::string vendor_id;  // "GenuineIntel", "AuthenticAMD"; "" when unknown
  std::string brand;      // leaves 0x80000002..4, trimmed; "" when absent
};

CpuidSnapshot read_cpuid_snapshot();

}  // namespace accelkit::cpu
