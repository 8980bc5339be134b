// bernoulli_kernel.hpp's loop, AVX2: eight Philox blocks at once, one per 32-bit lane.
#include <immintrin.h>

#include "bernoulli_kernel.hpp"

namespace accelkit::cpu::detail {

namespace {

// The low and high 32 bits of a * k in each lane.
inline void mulhilo(__m256i a, __m256i k, __m256i& lo, __m256i& hi) {
  const __m256i even = _mm256_mul_epu32(a, k);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), k);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// Where each lane's number is below the threshold: all ones, else zero.
inline __m256i below(__m256i x, __m256i threshold_flipped) {
  const __m256i flip = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  return _mm256_cmpgt_epi32(threshold_flipped, _mm256_xor_si256(x, flip));
}

}  // namespace

void bernoulli_blocks_avx2(void* dst, int bytes, uint64_t one, uint64_t seed, int64_t b0, int64_t b1,
                           uint32_t threshold) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mul_a = _mm256_set1_epi32(static_cast<int>(kPhiloxMulA));
  const __m256i mul_b = _mm256_set1_epi32(static_cast<int>(kPhiloxMulB));
  const __m256i limit = _mm256_set1_epi32(static_cast<int>(threshold ^ 0x80000000u));
  const __m256i one32 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(one)));
  const __m256i one64 = _mm256_set1_epi64x(static_cast<long long>(one));
  for (int64_t b = b0; b < b1; ++b) {
    const uint64_t first = static_cast<uint64_t>(b) * 8;  // the lanes' counters: first + 0..7, no carry
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first))), lanes);
    __m256i c1 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first >> 32)));
    __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      __m256i lo0, hi0, lo1, hi1;
      mulhilo(c0, mul_a, lo0, hi0);
      mulhilo(c2, mul_b, lo1, hi1);
      c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
      c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
      c1 = lo1;
      c3 = lo0;
      k0 += kPhiloxKeyA;
      k1 += kPhiloxKeyB;
    }
    // Word w of the eight blocks: elements 32b + 8w .. 32b + 8w + 7.
    const __m256i m[4] = {below(c0, limit), below(c1, limit), below(c2, limit), below(c3, limit)};
    if (bytes == 4) {
      auto* out = static_cast<uint32_t*>(dst) + (b - b0) * 32;
      for (int w = 0; w < 4; ++w)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * w), _mm256_and_si256(m[w], one32));
    } else if (bytes == 1) {
      // packs narrow within 128-bit halves: the bytes come as 4-element runs of words 0-3 from
      // the low half, then from the high half; the permute puts each word's eight in order.
      const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(m[0], m[1]), _mm256_packs_epi32(m[2], m[3]));
      const __m256i ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint8_t*>(dst) + (b - b0) * 32),
                          _mm256_and_si256(ordered, _mm256_set1_epi8(static_cast<char>(one))));
    } else if (bytes == 2) {
      auto* out = static_cast<uint16_t*>(dst) + (b - b0) * 32;
      const __m256i one16 = _mm256_set1_epi16(static_cast<short>(static_cast<uint16_t>(one)));
      for (int w = 0; w < 4; w += 2) {
        // packs works within 128-bit halves; the permute puts words w and w + 1 in order.
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(m[w], m[w + 1]), 0xD8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * w), _mm256_and_si256(packed, one16));
      }
    } else {
      auto* out = static_cast<uint64_t*>(dst) + (b - b0) * 32;
      for (int w = 0; w < 4; ++w) {
        const __m256i low = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(m[w]));
        const __m256i high = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(m[w], 1));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * w), _mm256_and_si256(low, one64));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * w + 4), _mm256_and_si256(high, one64));
      }
    }
  }
}

}  // namespace accelkit::cpu::detail
