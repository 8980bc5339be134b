// The AVX2 loop of the CPU plugin's max_pool2d kernel: four windows at a time, in registers. A
// window's two elements in a row are neighbours, so the four windows' eight elements of each of
// their two rows are one load; the forward splits them into the windows' four corners with one
// permute each, the backward builds them from four gradients and four comparisons. Rows of any
// width: the last windows of a row go through masked loads and stores. (LibTorch's NCHW
// forward branches per element, and on random data half of those branches are mispredicted;
// the plain loop this replaced ran every row's last OW % 8 windows one at a time, which on rows
// of 4 to 12 windows - pytorch/examples' MNIST - was most of them.)
#include "max_pool_kernel.hpp"

#include <immintrin.h>

#include <algorithm>

namespace accelkit::cpu::detail {

namespace {

// All ones in the first n of eight 32-bit lanes (n in 0..8).
inline __m256i first_lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// All ones in the first n of four 64-bit lanes (n in 0..4).
inline __m256i first_quads(int n) {
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
}

// Eight floats from p, the first n of them read (the rest 0).
inline __m256 load8(const float* p, int n) {
  return n == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, first_lanes(n));
}

inline void store8(float* p, __m256 v, int n) {
  if (n == 8)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, first_lanes(n), v);
}

// One candidate corner of four windows against their running maxima, in LibTorch's order: taken
// where it is larger, or NaN (so the last NaN wins); `at` is its offset in the window.
inline void take(__m128 v, __m128i at, __m128& m, __m128i& k) {
  const __m128 t = _mm_or_ps(_mm_cmp_ps(v, m, _CMP_GT_OQ), _mm_cmp_ps(v, v, _CMP_UNORD_Q));
  m = _mm_blendv_ps(m, v, t);
  k = _mm_castps_si128(_mm_blendv_ps(_mm_castsi128_ps(k), _mm_castsi128_ps(at), t));
}

}  // namespace

void max_pool_2x2_avx2(const MaxPool2x2& p, int64_t begin, int64_t end) {
  const int64_t W = p.W, OW = p.OW;
  const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);  // a row's left corners, then its right ones
  const __m128i one = _mm_set1_epi32(1), below = _mm_set1_epi32(static_cast<int>(W)),
                below_right = _mm_set1_epi32(static_cast<int>(W + 1));
  const __m256i steps = _mm256_setr_epi64x(0, 2, 4, 6);  // the four windows' first columns
  int64_t plane = begin / p.OH, oh = begin % p.OH;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t top = 2 * oh * W;  // the window's first row, as an index in the plane
    const float* r0 = p.in + plane * p.H * W + top;
    const float* r1 = r0 + W;
    float* out = p.out + r * OW;
    int64_t* idx = p.indices + r * OW;
    for (int64_t ow = 0; ow < OW; ow += 4) {
      const int n = static_cast<int>(std::min<int64_t>(4, OW - ow));
      const __m256 x0 = _mm256_permutevar8x32_ps(load8(r0 + 2 * ow, 2 * n), split);
      const __m256 x1 = _mm256_permutevar8x32_ps(load8(r1 + 2 * ow, 2 * n), split);
      __m128 m = _mm256_castps256_ps128(x0);
      __m128i k = _mm_setzero_si128();
      take(_mm256_extractf128_ps(x0, 1), one, m, k);
      take(_mm256_castps256_ps128(x1), below, m, k);
      take(_mm256_extractf128_ps(x1, 1), below_right, m, k);
      const __m256i at = _mm256_add_epi64(_mm256_add_epi64(_mm256_set1_epi64x(top + 2 * ow), steps),
                                          _mm256_cvtepi32_epi64(k));
      if (n == 4) {
        _mm_storeu_ps(out + ow, m);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + ow), at);
      } else {
        _mm_maskstore_ps(out + ow, _mm256_castsi256_si128(first_lanes(n)), m);
        _mm256_maskstore_epi64(reinterpret_cast<long long*>(idx + ow), first_quads(n), at);
      }
    }
    if (++oh == p.OH) oh = 0, ++plane;
  }
}

int64_t max_pool_2x2_backward_avx2(const MaxPool2x2Backward& p, int64_t begin, int64_t end) {
  const int64_t H = p.H, W = p.W, OH = p.OH, OW = p.OW;
  const __m256i pairs = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);  // each gradient to both corners of a row
  const __m256i steps = _mm256_setr_epi64x(0, 2, 4, 6);
  const __m256i one = _mm256_set1_epi64x(1), below = _mm256_set1_epi64x(W), below_right = _mm256_set1_epi64x(W + 1);
  int64_t placed = 0;
  for (int64_t plane = begin; plane < end; ++plane) {
    float* gi = p.grad_input + plane * H * W;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t top = 2 * oh * W;
      float* r0 = gi + top;
      float* r1 = r0 + W;
      const float* g = p.grad_output + (plane * OH + oh) * OW;
      const int64_t* ix = p.indices + (plane * OH + oh) * OW;
      for (int64_t ow = 0; ow < OW; ow += 4) {
        const int n = static_cast<int>(std::min<int64_t>(4, OW - ow));
        const __m256i at = n == 4 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ix + ow))
                                  : _mm256_maskload_epi64(reinterpret_cast<const long long*>(ix + ow), first_quads(n));
        // 0 + g, as LibTorch's sum makes it: -0.0 becomes +0.0.
        const __m128 v = _mm_add_ps(n == 4 ? _mm_loadu_ps(g + ow)
                                           : _mm_maskload_ps(g + ow, _mm256_castsi256_si128(first_lanes(n))),
                                    _mm_setzero_ps());
        const __m256 both = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), pairs);
        const __m256i k = _mm256_sub_epi64(at, _mm256_add_epi64(_mm256_set1_epi64x(top + 2 * ow), steps));
        const __m256i left = _mm256_cmpeq_epi64(k, _mm256_setzero_si256()), right = _mm256_cmpeq_epi64(k, one);
        const __m256i down_left = _mm256_cmpeq_epi64(k, below), down_right = _mm256_cmpeq_epi64(k, below_right);
        // A window's two corners of a row are the low half of its lane in one mask, the high half in the other.
        store8(r0 + 2 * ow, _mm256_and_ps(_mm256_castsi256_ps(_mm256_blend_epi32(left, right, 0xAA)), both), 2 * n);
        store8(r1 + 2 * ow, _mm256_and_ps(_mm256_castsi256_ps(_mm256_blend_epi32(down_left, down_right, 0xAA)), both),
               2 * n);
        const __m256i any = _mm256_or_si256(_mm256_or_si256(left, right), _mm256_or_si256(down_left, down_right));
        placed += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_pd(_mm256_castsi256_pd(any))) & ((1u << n) - 1));
      }
      if (W % 2 != 0) r0[W - 1] = r1[W - 1] = 0.0f;  // the column no window covers
    }
    if (H % 2 != 0)
      for (int64_t w = 0; w < W; ++w) gi[(H - 1) * W + w] = 0.0f;  // and the row
  }
  return placed;
}

}  // namespace accelkit::cpu::detail
