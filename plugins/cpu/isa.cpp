#include "isa.hpp"

#include <cstdio>

namespace accelkit::cpu {
namespace {

constexpr bool bit(std::uint64_t v, unsigned n) { return (v >> n) & 1u; }

// XCR0 state components.
constexpr std::uint64_t kXcr0Avx = (1u << 1) | (1u << 2);                // SSE, YMM upper
constexpr std::uint64_t kXcr0Avx512 = (1u << 5) | (1u << 6) | (1u << 7);  // opmask, ZMM_Hi256, Hi16_ZMM
constexpr std::uint64_t kXcr0Amx = (1u << 17) | (1u << 18);               // XTILECFG, XTILEDATA

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

IsaFlags decode_isa(const CpuidLeaves& l, std::uint64_t xcr0) {
  IsaFlags out;
  if (l.max_leaf < 7) return out;
  const bool osxsave = bit(l.leaf1_ecx, 27);
  const bool avx_hw = bit(l.leaf1_ecx, 28);
  // Without OSXSAVE, XCR0 cannot be read and no extended state is enabled.
  const std::uint64_t x = osxsave ? xcr0 : 0;
  const bool os_avx = (x & kXcr0Avx) == kXcr0Avx;
  const bool os_avx512 = os_avx && (x & kXcr0Avx512) == kXcr0Avx512;
  const bool os_amx = (x & kXcr0Amx) == kXcr0Amx;

  const bool avx2_hw = avx_hw && bit(l.leaf7_ebx, 5);
  const bool avx512f_hw = avx_hw && bit(l.leaf7_ebx, 16);
  const bool avx512bw_hw = avx512f_hw && bit(l.leaf7_ebx, 30);
  const bool avx512_bf16_hw = avx512f_hw && l.leaf7_max_subleaf >= 1 && bit(l.leaf7_1_eax, 5);
  const bool amx_bf16_hw = bit(l.leaf7_edx, 22) && bit(l.leaf7_edx, 24);

  out.avx2 = avx2_hw && os_avx;
  out.avx512f = avx512f_hw && os_avx512;
  out.avx512bw = avx512bw_hw && os_avx512;
  out.avx512_bf16 = avx512_bf16_hw && os_avx512;
  out.amx_bf16 = amx_bf16_hw && os_amx;

  if (avx2_hw && !os_avx)
    out.notes.push_back("AVX/AVX2: present in the CPU but the OS does not enable YMM state (XCR0=" +
                        hex(x) + ")");
  if (avx512f_hw && !os_avx512)
    out.notes.push_back("AVX-512: present in the CPU but the OS does not enable ZMM state (XCR0=" +
                        hex(x) + "), so it is not used");
  if (amx_bf16_hw && !os_amx)
    out.notes.push_back("AMX: present in the CPU but the OS does not enable tile state (XCR0=" +
                        hex(x) + "; needs Linux >= 5.16)");
  return out;
}

std::vector<std::pair<std::string, bool>> isa_entries(const IsaFlags& isa) {
  return {{"avx2", isa.avx2},
          {"avx512f", isa.avx512f},
          {"avx512bw", isa.avx512bw},
          {"avx512_bf16", isa.avx512_bf16},
          {"amx_bf16", isa.amx_bf16}};
}

std::string isa_list(const IsaFlags& isa) {
  std::string out;
  for (const auto& [name, on] : isa_entries(isa)) {
    if (!on) continue;
    if (!out.empty()) out += ',';
    out += name;
  }
  return out;
}

}  // namespace accelkit::cpu
