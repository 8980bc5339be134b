// decode_isa against cpuid/XGETBV values recorded on real machines.
#include <doctest/doctest.h>

#include "isa.hpp"

using accelkit::cpu::CpuidLeaves;
using accelkit::cpu::decode_isa;
using accelkit::cpu::isa_list;

namespace {

// Intel Core i7-4770 (Haswell): AVX2, no AVX-512. XCR0 = x87|SSE|AVX.
CpuidLeaves haswell() {
  CpuidLeaves l;
  l.max_leaf = 0xD;
  l.leaf1_ecx = 0x7FDAFBBF;
  l.leaf7_ebx = 0x000027AB;
  return l;
}

// Intel Xeon (Sapphire Rapids, family 6 model 143), recorded on the development VM:
// AVX-512 with AVX512_BF16, AMX-BF16/TILE/INT8. Linux >= 5.16 XCR0 = 0x602e7.
CpuidLeaves sapphire_rapids() {
  CpuidLeaves l;
  l.max_leaf = 0x20;
  l.leaf1_ecx = 0xFFFA3203;
  l.leaf7_max_subleaf = 2;
  l.leaf7_ebx = 0xF1BF27EB;
  l.leaf7_ecx = 0x1B415FDE;
  l.leaf7_edx = 0xBFD14410;
  l.leaf7_1_eax = 0x00001C30;
  return l;
}

// AMD Ryzen 9 7950X (Zen 4): AVX-512 with AVX512_BF16, no AMX. XCR0 = 0x2e7.
CpuidLeaves zen4() {
  CpuidLeaves l;
  l.max_leaf = 0x10;
  l.leaf1_ecx = 0x7ED8320B;
  l.leaf7_max_subleaf = 1;
  l.leaf7_ebx = 0xF1BF97A9;
  l.leaf7_ecx = 0x00405FCE;
  l.leaf7_edx = 0x10000010;
  l.leaf7_1_eax = 0x00000020;
  return l;
}

}  // namespace

TEST_CASE("Haswell: AVX2 only") {
  auto isa = decode_isa(haswell(), 0x7);
  CHECK(isa.avx2);
  CHECK_FALSE(isa.avx512f);
  CHECK_FALSE(isa.avx512bw);
  CHECK_FALSE(isa.avx512_bf16);
  CHECK_FALSE(isa.amx_bf16);
  CHECK_FALSE(isa.bf16_native());
  CHECK(isa_list(isa) == "avx2");
  CHECK(isa.notes.empty());
}

TEST_CASE("Sapphire Rapids: AVX-512, AVX512_BF16 and AMX-BF16") {
  auto isa = decode_isa(sapphire_rapids(), 0x602E7);
  CHECK(isa.avx2);
  CHECK(isa.avx512f);
  CHECK(isa.avx512bw);
  CHECK(isa.avx512_bf16);
  CHECK(isa.amx_bf16);
  CHECK(isa.bf16_native());
  CHECK(isa_list(isa) == "avx2,avx512f,avx512bw,avx512_bf16,amx_bf16");
  CHECK(isa.notes.empty());
}

TEST_CASE("Sapphire Rapids on a kernel without AMX state: AMX not usable, noted") {
  auto isa = decode_isa(sapphire_rapids(), 0x2E7);
  CHECK(isa.avx512_bf16);
  CHECK_FALSE(isa.amx_bf16);
  REQUIRE(isa.notes.size() == 1);
  CHECK(isa.notes[0].find("AMX") != std::string::npos);
}

TEST_CASE("Zen 4: AVX512_BF16 without AMX") {
  auto isa = decode_isa(zen4(), 0x2E7);
  CHECK(isa.avx2);
  CHECK(isa.avx512f);
  CHECK(isa.avx512bw);
  CHECK(isa.avx512_bf16);
  CHECK_FALSE(isa.amx_bf16);
  CHECK(isa.bf16_native());
  CHECK(isa_list(isa) == "avx2,avx512f,avx512bw,avx512_bf16");
}

TEST_CASE("AVX-512 hardware with the OS not enabling ZMM state: no AVX-512") {
  // Zen 4 registers under an OS (or hypervisor) whose XCR0 has only x87|SSE|AVX.
  auto isa = decode_isa(zen4(), 0x7);
  CHECK(isa.avx2);
  CHECK_FALSE(isa.avx512f);
  CHECK_FALSE(isa.avx512bw);
  CHECK_FALSE(isa.avx512_bf16);
  CHECK_FALSE(isa.bf16_native());
  REQUIRE(isa.notes.size() == 1);
  CHECK(isa.notes[0].find("AVX-512") != std::string::npos);
  CHECK(isa.notes[0].find("0x7") != std::string::npos);

  // Opmask enabled but not the upper ZMM halves is still no AVX-512.
  CHECK_FALSE(decode_isa(zen4(), 0x27).avx512f);
}

TEST_CASE("No OSXSAVE: nothing beyond SSE, whatever XCR0 says") {
  auto leaves = sapphire_rapids();
  leaves.leaf1_ecx &= ~(1u << 27);
  auto isa = decode_isa(leaves, 0x602E7);
  CHECK(isa_list(isa).empty());
  CHECK_FALSE(isa.amx_bf16);
}

TEST_CASE("max leaf below 7 or no cpuid at all: nothing") {
  auto leaves = sapphire_rapids();
  leaves.max_leaf = 6;
  CHECK(isa_list(decode_isa(leaves, 0x602E7)).empty());
  CHECK(isa_list(decode_isa(CpuidLeaves{}, 0)).empty());
}

TEST_CASE("AVX512_BF16 needs leaf 7 subleaf 1 to exist") {
  auto leaves = zen4();
  leaves.leaf7_max_subleaf = 0;  // subleaf 1 not reported: its EAX is not meaningful
  auto isa = decode_isa(leaves, 0x2E7);
  CHECK(isa.avx512f);
  CHECK_FALSE(isa.avx512_bf16);
}
