// The AVX2 loop of the CPU plugin's max_pool2d kernel: branch-free selects over each output
// row, vectorised 8 windows at a time (LibTorch's NCHW kernel branches per element, and on
// random data half of those branches are mispredicted).
#include "max_pool_kernel.hpp"

namespace accelkit::cpu::detail {

namespace {

// One candidate against the running maximum, in LibTorch's order: taken when larger, or NaN.
inline void take(float v, int64_t at, float& m, int64_t& k) {
  const bool t = (v > m) | (v != v);
  m = t ? v : m;
  k = t ? at : k;
}

}  // namespace

void max_pool_2x2_avx2(const MaxPool2x2& p, int64_t begin, int64_t end) {
  const int64_t W = p.W, OW = p.OW;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t plane = r / p.OH, oh = r % p.OH;
    const int64_t top = 2 * oh * W;  // the window's first row, as an index in the plane
    const float* r0 = p.in + plane * p.H * W + top;
    const float* r1 = r0 + W;
    float* out = p.out + r * OW;
    int64_t* idx = p.indices + r * OW;
#pragma omp simd
    for (int64_t ow = 0; ow < OW; ++ow) {
      float m = r0[2 * ow];
      int64_t k = 0;
      take(r0[2 * ow + 1], 1, m, k);
      take(r1[2 * ow], W, m, k);
      take(r1[2 * ow + 1], W + 1, m, k);
      out[ow] = m;
      idx[ow] = top + 2 * ow + k;
    }
  }
}

int64_t max_pool_2x2_backward_avx2(const MaxPool2x2Backward& p, int64_t begin, int64_t end) {
  const int64_t H = p.H, W = p.W, OH = p.OH, OW = p.OW;
  int64_t placed = 0;
  for (int64_t plane = begin; plane < end; ++plane) {
    float* gi = p.grad_input + plane * H * W;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t top = 2 * oh * W;
      float* r0 = gi + top;
      float* r1 = r0 + W;
      const float* g = p.grad_output + (plane * OH + oh) * OW;
      const int64_t* ix = p.indices + (plane * OH + oh) * OW;
#pragma omp simd reduction(+ : placed)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t k = ix[ow] - (top + 2 * ow);
        const float v = g[ow] + 0.0f;  // 0 + g, as LibTorch's sum makes it: -0.0 becomes +0.0
        r0[2 * ow] = k == 0 ? v : 0.0f;
        r0[2 * ow + 1] = k == 1 ? v : 0.0f;
        r1[2 * ow] = k == W ? v : 0.0f;
        r1[2 * ow + 1] = k == W + 1 ? v : 0.0f;
        placed += static_cast<int64_t>((k == 0) | (k == 1) | (k == W) | (k == W + 1));
      }
      if (W % 2 != 0) r0[W - 1] = r1[W - 1] = 0.0f;  // the column no window covers
    }
    if (H % 2 != 0)
      for (int64_t w = 0; w < W; ++w) gi[(H - 1) * W + w] = 0.0f;  // and the row
  }
  return placed;
}

}  // namespace accelkit::cpu::detail
