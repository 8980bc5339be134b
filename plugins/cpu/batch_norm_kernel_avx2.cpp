// The AVX2 loops of the CPU plugin's batch_norm kernels (batch_norm_kernel.hpp). Rows whose
// channels are a multiple of 8 keep a run's sums in registers (AVX2 intrinsics: the compiler
// keeps an array of partials in memory, a store and a reload a row); other widths, and planes,
// sum runs in float arrays or reductions. Each run's float sums are then added in double.
#include "batch_norm_kernel.hpp"

#include <immintrin.h>

namespace accelkit::cpu::detail {

namespace {

constexpr int64_t kRun = 16;     // rows a channel summed in float before the double sums
constexpr int64_t kWide = 256;   // channels a pass of the generic rows loop (its float partials)
constexpr int64_t kPlaneRun = 1024;

// Adds the 8 floats of v, widened, to out[0..8).
inline void add_to_double(double* out, __m256 v) {
  _mm256_storeu_pd(out, _mm256_add_pd(_mm256_loadu_pd(out), _mm256_cvtps_pd(_mm256_castps256_ps128(v))));
  _mm256_storeu_pd(out + 4, _mm256_add_pd(_mm256_loadu_pd(out + 4), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
}

// The sums of rows r0..r1 (at most kRun) whose width C is a multiple of 8, for the channels
// [c0, c0 + 8V): the partials in registers, two sets for alternate rows. Grad: b = dy, and the
// second sum is dy * (x - k) (k the mean); else b is unused and the sums are x - k and its square.
template <int V, bool Grad>
void sums_run_group(const float* x, const float* b, int64_t r0, int64_t r1, int64_t C, int64_t c0, const float* shift,
                    double* s1, double* s2) {
  __m256 k[V], a1[2][V], a2[2][V];
  for (int v = 0; v < V; ++v) {
    k[v] = _mm256_loadu_ps(shift + c0 + 8 * v);
    a1[0][v] = a1[1][v] = a2[0][v] = a2[1][v] = _mm256_setzero_ps();
  }
  auto row = [&](int h, int64_t at) {
    const float* xr = x + at * C + c0;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xr + 8 * v), k[v]);
      if constexpr (Grad) {
        const __m256 g = _mm256_loadu_ps(b + at * C + c0 + 8 * v);
        a1[h][v] = _mm256_add_ps(a1[h][v], g);
        a2[h][v] = _mm256_add_ps(a2[h][v], _mm256_mul_ps(g, d));
      } else {
        a1[h][v] = _mm256_add_ps(a1[h][v], d);
        a2[h][v] = _mm256_add_ps(a2[h][v], _mm256_mul_ps(d, d));
      }
    }
  };
  int64_t r = r0;
  for (; r + 1 < r1; r += 2) {
    row(0, r);
    row(1, r + 1);
  }
  if (r < r1) row(0, r);
  for (int v = 0; v < V; ++v) {
    add_to_double(s1 + c0 + 8 * v, _mm256_add_ps(a1[0][v], a1[1][v]));
    add_to_double(s2 + c0 + 8 * v, _mm256_add_ps(a2[0][v], a2[1][v]));
  }
}

// The rows' sums where C is a multiple of 8: a run of rows at a time, its channels in groups of
// up to 32 (so a row's cache lines are read in one run).
template <bool Grad>
void sums_rows_by8(const float* x, const float* b, int64_t rows, int64_t C, const float* shift, double* s1,
                   double* s2) {
  for (int64_t r0 = 0; r0 < rows; r0 += kRun) {
    const int64_t r1 = r0 + kRun < rows ? r0 + kRun : rows;
    int64_t c0 = 0;
    for (; c0 + 32 <= C; c0 += 32) sums_run_group<4, Grad>(x, b, r0, r1, C, c0, shift, s1, s2);
    if (C - c0 == 24) sums_run_group<3, Grad>(x, b, r0, r1, C, c0, shift, s1, s2);
    if (C - c0 == 16) sums_run_group<2, Grad>(x, b, r0, r1, C, c0, shift, s1, s2);
    if (C - c0 == 8) sums_run_group<1, Grad>(x, b, r0, r1, C, c0, shift, s1, s2);
  }
}

// The same for any width, a run's partials in float arrays (kWide channels a pass).
template <bool Grad>
void sums_rows_generic(const float* x, const float* b, int64_t rows, int64_t C, const float* shift, double* s1,
                       double* s2) {
  float p1[kWide], p2[kWide];
  for (int64_t c0 = 0; c0 < C; c0 += kWide) {
    const int64_t cn = C - c0 < kWide ? C - c0 : kWide;
    for (int64_t r0 = 0; r0 < rows; r0 += kRun) {
      const int64_t r1 = r0 + kRun < rows ? r0 + kRun : rows;
      for (int64_t c = 0; c < cn; ++c) p1[c] = p2[c] = 0.0f;
      for (int64_t r = r0; r < r1; ++r) {
        const float* __restrict xr = x + r * C + c0;
        const float* __restrict k = shift + c0;
        if constexpr (Grad) {
          const float* __restrict g = b + r * C + c0;
#pragma omp simd
          for (int64_t c = 0; c < cn; ++c) {
            p1[c] += g[c];
            p2[c] += g[c] * (xr[c] - k[c]);
          }
        } else {
#pragma omp simd
          for (int64_t c = 0; c < cn; ++c) {
            const float v = xr[c] - k[c];
            p1[c] += v;
            p2[c] += v * v;
          }
        }
      }
      for (int64_t c = 0; c < cn; ++c) {
        s1[c0 + c] += static_cast<double>(p1[c]);
        s2[c0 + c] += static_cast<double>(p2[c]);
      }
    }
  }
}

template <int64_t W>
void apply_rows_fixed(const float* x, float* y, int64_t rows, const float* shift, const float* scale,
                      const float* offset) {
  float m[W], s[W], o[W];
  for (int64_t c = 0; c < W; ++c) m[c] = shift[c], s[c] = scale[c], o[c] = offset[c];
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * W;
    float* yr = y + r * W;
#pragma omp simd
    for (int64_t c = 0; c < W; ++c) yr[c] = (xr[c] - m[c]) * s[c] + o[c];
  }
}

template <int64_t W>
void grad_input_rows_fixed(const float* dy, const float* x, float* dx, int64_t rows, const float* a, const float* k,
                           const float* mean, const float* d) {
  float av[W], kv[W], mv[W], dv[W];
  for (int64_t c = 0; c < W; ++c) av[c] = a[c], kv[c] = k[c], mv[c] = mean[c], dv[c] = d[c];
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = dy + r * W;
    const float* xr = x + r * W;
    float* o = dx + r * W;
#pragma omp simd
    for (int64_t c = 0; c < W; ++c) o[c] = g[c] * av[c] + (xr[c] - mv[c]) * kv[c] + dv[c];
  }
}

}  // namespace

void bn_stats_rows_avx2(const float* x, int64_t rows, int64_t C, const float* shift, double* sum, double* sq) {
  if (C % 8 == 0) return sums_rows_by8<false>(x, nullptr, rows, C, shift, sum, sq);
  sums_rows_generic<false>(x, nullptr, rows, C, shift, sum, sq);
}

void bn_apply_rows_avx2(const float* x, float* y, int64_t rows, int64_t C, const float* shift, const float* scale,
                        const float* offset) {
  switch (C) {
    case 8: return apply_rows_fixed<8>(x, y, rows, shift, scale, offset);
    case 16: return apply_rows_fixed<16>(x, y, rows, shift, scale, offset);
    case 32: return apply_rows_fixed<32>(x, y, rows, shift, scale, offset);
    default: break;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * C;
    float* __restrict yr = y + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - shift[c]) * scale[c] + offset[c];
  }
}

void bn_grad_stats_rows_avx2(const float* dy, const float* x, int64_t rows, int64_t C, const float* mean,
                             double* sum_dy, double* dot) {
  if (C % 8 == 0) return sums_rows_by8<true>(x, dy, rows, C, mean, sum_dy, dot);
  sums_rows_generic<true>(x, dy, rows, C, mean, sum_dy, dot);
}

void bn_grad_input_rows_avx2(const float* dy, const float* x, float* dx, int64_t rows, int64_t C, const float* a,
                             const float* k, const float* mean, const float* d) {
  switch (C) {
    case 8: return grad_input_rows_fixed<8>(dy, x, dx, rows, a, k, mean, d);
    case 16: return grad_input_rows_fixed<16>(dy, x, dx, rows, a, k, mean, d);
    case 32: return grad_input_rows_fixed<32>(dy, x, dx, rows, a, k, mean, d);
    default: break;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict g = dy + r * C;
    const float* __restrict xr = x + r * C;
    float* __restrict o = dx + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = g[c] * a[c] + (xr[c] - mean[c]) * k[c] + d[c];
  }
}

void bn_stats_planes_avx2(const float* x, int64_t p0, int64_t p1, int64_t n, int64_t C, const float* shift,
                          double* sum, double* sq) {
  for (int64_t p = p0; p < p1; ++p) {
    const float* xp = x + p * n;
    const float k = shift[p % C];
    double s = 0.0, q = 0.0;
    for (int64_t i0 = 0; i0 < n; i0 += kPlaneRun) {
      const int64_t i1 = i0 + kPlaneRun < n ? i0 + kPlaneRun : n;
      float bs = 0.0f, bq = 0.0f;
#pragma omp simd reduction(+ : bs, bq)
      for (int64_t i = i0; i < i1; ++i) {
        const float v = xp[i] - k;
        bs += v;
        bq += v * v;
      }
      s += static_cast<double>(bs);
      q += static_cast<double>(bq);
    }
    sum[p] = s;
    sq[p] = q;
  }
}

void bn_apply_planes_avx2(const float* x, float* y, int64_t p0, int64_t p1, int64_t n, int64_t C, const float* shift,
                          const float* scale, const float* offset) {
  for (int64_t p = p0; p < p1; ++p) {
    const float* __restrict xp = x + p * n;
    float* __restrict yp = y + p * n;
    const float m = shift[p % C], s = scale[p % C], o = offset[p % C];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) yp[i] = (xp[i] - m) * s + o;
  }
}

}  // namespace accelkit::cpu::detail
