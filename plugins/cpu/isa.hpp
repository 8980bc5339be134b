// Which vector/matrix ISA extensions are usable: the CPU must report them (cpuid) and the OS
// must save their register state (XCR0, read with XGETBV). decode_isa is pure so recorded
// register values from real machines can be replayed in tests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace accelkit::cpu {

// The cpuid registers decode_isa looks at. Zero means "not reported".
struct CpuidLeaves {
  std::uint32_t max_leaf = 0;           // leaf 0 EAX
  std::uint32_t leaf1_ecx = 0;          // leaf 1 ECX: OSXSAVE (27), AVX (28)
  std::uint32_t leaf7_max_subleaf = 0;  // leaf 7.0 EAX
  std::uint32_t leaf7_ebx = 0;          // leaf 7.0 EBX: AVX2 (5), AVX512F (16), AVX512BW (30)
  std::uint32_t leaf7_ecx = 0;          // leaf 7.0 ECX
  std::uint32_t leaf7_edx = 0;          // leaf 7.0 EDX: AMX-BF16 (22), AMX-TILE (24)
  std::uint32_t leaf7_1_eax = 0;        // leaf 7.1 EAX: AVX512_BF16 (5)
};

struct IsaFlags {
  bool avx2 = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  // Hardware features the OS does not enable, one line each ("AVX-512: ... XCR0=0x7").
  std::vector<std::string> notes;

  bool bf16_native() const noexcept { return avx512_bf16 || amx_bf16; }
};

IsaFlags decode_isa(const CpuidLeaves& leaves, std::uint64_t xcr0);

// The usable extensions as a comma list in fixed order ("avx2,avx512f,avx512bw"); "" = none.
std::string isa_list(const IsaFlags& isa);

// The individual names isa_list uses, paired with their flag, in the same order.
std::vector<std::pair<std::string, bool>> isa_entries(const IsaFlags& isa);

}  // namespace accelkit::cpu
