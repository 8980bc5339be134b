// The AVX2 loop of the CPU plugin's convolution_backward kernel: the weight gradient of a
// one-input-channel convolution (the first layer of an image network) as KW running sums per
// weight row, 8 output columns at a time. LibTorch's oneDNN path spends ~2.7 ms on it for
// pytorch/examples' MNIST network's first layer (64x1x28x28, 10 5x5 filters) on an AVX2-only
// CPU at 2 threads: 18 MFLOP at ~7 GFLOP/s.
#include <immintrin.h>

#include "conv_kernel.hpp"

namespace accelkit::cpu::detail {

namespace {

float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}

// One row of grad_weight (filter oc, kernel row kh): KW sums over every image, output row and
// column. Per image the sums start from zero and are then added to the row's totals (fewer
// rounding steps on long sums); the bias sum rides along on the kh = 0 row.
template <int KW>
void weight_row(const ConvWeightGrad1& p, int64_t oc, int64_t kh) {
  const bool bias = p.grad_bias != nullptr && kh == 0;
  __m256 total[KW] = {};
  float total_tail[KW] = {};
  __m256 bias_total = _mm256_setzero_ps();
  float bias_tail = 0.0f;
  const int64_t full = p.OW - p.OW % 8;
  for (int64_t n = 0; n < p.N; ++n) {
    __m256 acc[KW] = {};
    float tail[KW] = {};
    __m256 bias_acc = _mm256_setzero_ps();
    const float* g_plane = p.grad_output + (n * p.OC + oc) * p.OH * p.OW;
    const float* x_plane = p.input + n * p.H * p.W;
    for (int64_t oh = 0; oh < p.OH; ++oh) {
      const float* g = g_plane + oh * p.OW;
      const float* x = x_plane + (oh + kh) * p.W;
      for (int64_t ow = 0; ow < full; ow += 8) {
        const __m256 gv = _mm256_loadu_ps(g + ow);
        for (int k = 0; k < KW; ++k) acc[k] = _mm256_fmadd_ps(gv, _mm256_loadu_ps(x + ow + k), acc[k]);
        if (bias) bias_acc = _mm256_add_ps(bias_acc, gv);
      }
      for (int64_t ow = full; ow < p.OW; ++ow) {
        for (int k = 0; k < KW; ++k) tail[k] += g[ow] * x[ow + k];
        if (bias) bias_tail += g[ow];
      }
    }
    for (int k = 0; k < KW; ++k) {
      total[k] = _mm256_add_ps(total[k], acc[k]);
      total_tail[k] += tail[k];
    }
    bias_total = _mm256_add_ps(bias_total, bias_acc);
  }
  float* row = p.grad_weight + (oc * p.KH + kh) * KW;
  for (int k = 0; k < KW; ++k) row[k] = hsum(total[k]) + total_tail[k];
  if (bias) p.grad_bias[oc] = hsum(bias_total) + bias_tail;
}

}  // namespace

void conv_weight_grad_c1_avx2(const ConvWeightGrad1& p, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const int64_t oc = r / p.KH, kh = r % p.KH;
    switch (p.KW) {
      case 1: weight_row<1>(p, oc, kh); break;
      case 2: weight_row<2>(p, oc, kh); break;
      case 3: weight_row<3>(p, oc, kh); break;
      case 4: weight_row<4>(p, oc, kh); break;
      case 5: weight_row<5>(p, oc, kh); break;
      case 6: weight_row<6>(p, oc, kh); break;
      case 7: weight_row<7>(p, oc, kh); break;
      default: break;  // the caller takes KW <= kConvWeightGradMaxKW only
    }
  }
}

}  // namespace accelkit::cpu::detail
