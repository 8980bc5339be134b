// bernoulli_kernel.hpp's loop, AVX-512F: sixteen Philox blocks at once, the eight of two
// consecutive 32-element runs, one per 32-bit lane; the same numbers as the AVX2 loop.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12 warns on the self-initialisation inside _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "bernoulli_kernel.hpp"

namespace accelkit::cpu::detail {

namespace {

// The low and high 32 bits of a * k in each lane.
inline void mulhilo(__m512i a, __m512i k, __m512i& lo, __m512i& hi) {
  const __m512i even = _mm512_mul_epu32(a, k);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), k);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

// Lanes 0-7: counters first + 0..7; lanes 8-15: second + 0..7 (both multiples of 8: no carry
// out of the low word within eight lanes).
inline void counters(uint64_t first, uint64_t second, __m512i& c0, __m512i& c1) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo_a = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first))), lanes);
  const __m256i lo_b = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(second))), lanes);
  c0 = _mm512_inserti64x4(_mm512_castsi256_si512(lo_a), lo_b, 1);
  c1 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first >> 32)))),
                          _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(second >> 32))), 1);
}

// Word w's 16 results (lanes 0-7 at `a`, lanes 8-15 at `b`, element offsets) into dst.
inline void store_word(void* dst, int bytes, uint64_t one, __mmask16 m, int64_t a, int64_t b) {
  if (bytes == 8) {
    const __m512i one64 = _mm512_set1_epi64(static_cast<long long>(one));
    auto* out = static_cast<uint64_t*>(dst);
    _mm512_storeu_si512(out + a, _mm512_maskz_mov_epi64(static_cast<__mmask8>(m), one64));
    _mm512_storeu_si512(out + b, _mm512_maskz_mov_epi64(static_cast<__mmask8>(m >> 8), one64));
    return;
  }
  const __m512i v = _mm512_maskz_mov_epi32(m, _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(one))));
  if (bytes == 4) {
    auto* out = static_cast<uint32_t*>(dst);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + a), _mm512_castsi512_si256(v));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + b), _mm512_extracti64x4_epi64(v, 1));
  } else if (bytes == 2) {
    const __m256i narrow = _mm512_cvtepi32_epi16(v);
    auto* out = static_cast<uint16_t*>(dst);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + a), _mm256_castsi256_si128(narrow));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + b), _mm256_extracti128_si256(narrow, 1));
  } else {
    const __m128i narrow = _mm512_cvtepi32_epi8(v);
    auto* out = static_cast<uint8_t*>(dst);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + a), narrow);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + b), _mm_unpackhi_epi64(narrow, narrow));
  }
}

}  // namespace

void bernoulli_blocks_avx512(void* dst, int bytes, uint64_t one, uint64_t seed, int64_t b0, int64_t b1,
                             uint32_t threshold) {
  const __m512i mul_a = _mm512_set1_epi32(static_cast<int>(kPhiloxMulA));
  const __m512i mul_b = _mm512_set1_epi32(static_cast<int>(kPhiloxMulB));
  const __m512i limit = _mm512_set1_epi32(static_cast<int>(threshold));
  int64_t b = b0;
  for (; b + 1 < b1; b += 2) {
    __m512i c0, c1;
    counters(static_cast<uint64_t>(b) * 8, static_cast<uint64_t>(b + 1) * 8, c0, c1);
    __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      __m512i lo0, hi0, lo1, hi1;
      mulhilo(c0, mul_a, lo0, hi0);
      mulhilo(c2, mul_b, lo1, hi1);
      c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
      c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
      c1 = lo1;
      c3 = lo0;
      k0 += kPhiloxKeyA;
      k1 += kPhiloxKeyB;
    }
    const __m512i words[4] = {c0, c1, c2, c3};
    for (int w = 0; w < 4; ++w)
      store_word(dst, bytes, one, _mm512_cmplt_epu32_mask(words[w], limit), (b - b0) * 32 + 8 * w,
                 (b + 1 - b0) * 32 + 8 * w);
  }
  if (b < b1)
    bernoulli_blocks_avx2(static_cast<uint8_t*>(dst) + (b - b0) * 32 * bytes, bytes, one, seed, b, b1, threshold);
}

}  // namespace accelkit::cpu::detail
