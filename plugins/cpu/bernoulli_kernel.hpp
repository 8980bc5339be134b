// Internal to the CPU plugin's bernoulli_ kernel (bernoulli_op.cpp): the element loops, per ISA
// (AVX2; AVX-512F where the CPU has it).
// Plain data only, like max_pool_kernel.hpp: the ISA translation unit includes nothing else.
//
// The numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11; LibTorch's own at::philox_engine computes the same blocks), keyed by a 64-bit seed.
// Element i of a stream takes word (i / 8) % 4 of the block whose 64-bit counter is
// (i / 32) * 8 + i % 8: 32 consecutive elements are the four words of 8 consecutive blocks, so
// eight lanes make 32 elements at once and each element's number depends on the seed and i
// alone, never on the thread count or the chunking. An element is 1 where its number is below
// `threshold` (p * 2^32, rounded down: probability within 2^-32 of p), else 0.
#pragma once

#include <cstdint>

namespace accelkit::cpu::detail {

inline constexpr uint32_t kPhiloxMulA = 0xD2511F53, kPhiloxMulB = 0xCD9E8D57;
inline constexpr uint32_t kPhiloxKeyA = 0x9E3779B9, kPhiloxKeyB = 0xBB67AE85;

// The four words of the Philox4x32-10 block for `counter` (words 0-1 of the 128-bit counter;
// 2-3 zero) and `seed` (the key).
inline void philox_block(uint64_t counter, uint64_t seed, uint32_t out[4]) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxMulA) * c0, p1 = static_cast<uint64_t>(kPhiloxMulB) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0, n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kPhiloxKeyA;
    k1 += kPhiloxKeyB;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// The number of element i of the stream keyed by `seed` (the layout above).
inline uint32_t philox_element(uint64_t seed, uint64_t i) {
  uint32_t words[4];
  philox_block((i / 32) * 8 + i % 8, seed, words);
  return words[(i / 8) % 4];
}

#if defined(__x86_64__) || defined(_M_X64)
// Elements [32 * b0, 32 * b1) of the stream into dst (dst[0] is element 32 * b0): `one` (the bit
// pattern of 1 in an element of `bytes` bytes: 1, 2, 4 or 8) where the number is below threshold,
// else 0.
void bernoulli_blocks_avx2(void* dst, int bytes, uint64_t one, uint64_t seed, int64_t b0, int64_t b1,
                           uint32_t threshold);
// The same with AVX-512F, sixteen blocks at once (the same numbers; a CPU with AVX-512F has AVX2
// for an odd last block).
void bernoulli_blocks_avx512(void* dst, int bytes, uint64_t one, uint64_t seed, int64_t b0, int64_t b1,
                             uint32_t threshold);
#endif

}  // namespace accelkit::cpu::detail
