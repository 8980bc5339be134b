#include "cpuid.hpp"

#include <cstring>

#include "accelkit/sdk/support/host_file.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define ACCELKIT_CPU_X86 1
#endif

namespace accelkit::cpu {

#if defined(ACCELKIT_CPU_X86)

namespace {
std::uint64_t xgetbv0() {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}
}  // namespace

CpuidSnapshot read_cpuid_snapshot() {
  CpuidSnapshot s;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return s;
  s.leaves.max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  s.vendor_id = vendor;
  if (s.leaves.max_leaf >= 1) {
    __cpuid(1, a, b, c, d);
    s.leaves.leaf1_ecx = c;
  }
  if (s.leaves.max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    s.leaves.leaf7_max_subleaf = a;
    s.leaves.leaf7_ebx = b;
    s.leaves.leaf7_ecx = c;
    s.leaves.leaf7_edx = d;
    if (s.leaves.leaf7_max_subleaf >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      s.leaves.leaf7_1_eax = a;
    }
  }
  if ((s.leaves.leaf1_ecx >> 27) & 1u) s.xcr0 = xgetbv0();  // XGETBV faults without OSXSAVE

  unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      __cpuid(0x80000002u + i, a, b, c, d);
      std::memcpy(brand + 16 * i, &a, 4);
      std::memcpy(brand + 16 * i + 4, &b, 4);
      std::memcpy(brand + 16 * i + 8, &c, 4);
      std::memcpy(brand + 16 * i + 12, &d, 4);
    }
    s.brand = host::trim(brand);
  }
  return s;
}

#else

CpuidSnapshot read_cpuid_snapshot() { return {}; }

#endif

}  // namespace accelkit::cpu
