// The AVX2 loops of the CPU plugin's Winograd F(2x2,3x3) convolution (winograd_kernel.hpp).
// ResNet-20's 3x3 layers (16, 32 and 64 channels at 32x32, 16x16 and 8x8, batch 128,
// channels-last) run 1.4-1.7x as fast as LibTorch's oneDNN kernel on an AVX2-only Zen 3 at 2
// threads, closer to fp64 too.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "winograd_kernel.hpp"

namespace accelkit::cpu::detail {

namespace {

constexpr int64_t kMR = 6;   // tiles per micro-kernel step (rows of U)
constexpr int64_t kNR = 16;  // output channels per micro-kernel step (two vectors)

// The lanes below n (0 to 8) of a vector, for the masked loads and stores of a channel tail.
__m256i lanes_below(int64_t n) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), index);
}

template <bool Tail>
__m256 load(const float* p, __m256i mask) {
  if constexpr (Tail) return _mm256_maskload_ps(p, mask);
  (void)mask;
  return _mm256_loadu_ps(p);
}

template <bool Tail>
void store(float* p, __m256 v, __m256i mask) {
  if constexpr (Tail) {
    _mm256_maskstore_ps(p, mask, v);
  } else {
    (void)mask;
    _mm256_storeu_ps(p, v);
  }
}

// B^T down one input column (4 rows) at column x, 8 channels from c: zeros outside the image.
template <bool Tail>
inline void column(const float* const row[4], int64_t x, int64_t W, int64_t C, int64_t c, __m256i mask, __m256& v0,
                   __m256& v1, __m256& v2, __m256& v3) {
  if (x < 0 || x >= W) {
    v0 = v1 = v2 = v3 = _mm256_setzero_ps();
    return;
  }
  const int64_t o = x * C + c;
  const __m256 d0 = load<Tail>(row[0] + o, mask), d1 = load<Tail>(row[1] + o, mask);
  const __m256 d2 = load<Tail>(row[2] + o, mask), d3 = load<Tail>(row[3] + o, mask);
  v0 = _mm256_sub_ps(d0, d2);
  v1 = _mm256_add_ps(d1, d2);
  v2 = _mm256_sub_ps(d2, d1);
  v3 = _mm256_sub_ps(d1, d3);
}

// B^T d B for `count` tiles of one tile row from tile column tx0, 8 channels from c, into u
// (the first tile's channel c of U[0]; xs: the distance between the U[xi]). Each column's
// vertical transform serves two tiles: the next tile starts two columns on.
template <bool Tail>
void input_run(const WinogradConv& p, const float* const row[4], int64_t tx0, int64_t count, int64_t c,
               __m256i mask, float* u, int64_t xs) {
  int64_t x = 2 * tx0 - p.pw;
  __m256 a0, a1, a2, a3, b0, b1, b2, b3;
  column<Tail>(row, x, p.W, p.C, c, mask, a0, a1, a2, a3);
  column<Tail>(row, x + 1, p.W, p.C, c, mask, b0, b1, b2, b3);
  for (int64_t i = 0; i < count; ++i, x += 2, u += p.Cp) {
    __m256 c0, c1, c2, c3, e0, e1, e2, e3;
    column<Tail>(row, x + 2, p.W, p.C, c, mask, c0, c1, c2, c3);
    column<Tail>(row, x + 3, p.W, p.C, c, mask, e0, e1, e2, e3);
    const __m256 r[4][4] = {{a0, b0, c0, e0}, {a1, b1, c1, e1}, {a2, b2, c2, e2}, {a3, b3, c3, e3}};
    for (int i4 = 0; i4 < 4; ++i4) {
      _mm256_store_ps(u + (i4 * 4 + 0) * xs, _mm256_sub_ps(r[i4][0], r[i4][2]));
      _mm256_store_ps(u + (i4 * 4 + 1) * xs, _mm256_add_ps(r[i4][1], r[i4][2]));
      _mm256_store_ps(u + (i4 * 4 + 2) * xs, _mm256_sub_ps(r[i4][2], r[i4][1]));
      _mm256_store_ps(u + (i4 * 4 + 3) * xs, _mm256_sub_ps(r[i4][1], r[i4][3]));
    }
    a0 = c0, a1 = c1, a2 = c2, a3 = c3;
    b0 = e0, b1 = e1, b2 = e2, b3 = e3;
  }
}

// Calls fn(n, ty, tx0, count, t) for each run of tiles of one tile row in the tiles
// [first, first + tiles) (t: the run's first tile within them).
template <typename Fn>
void for_each_run(const WinogradConv& p, int64_t first, int64_t tiles, Fn&& fn) {
  int64_t row = first / p.TW, tx = first - row * p.TW;
  for (int64_t t = 0; t < tiles;) {
    const int64_t count = std::min(p.TW - tx, tiles - t);
    const int64_t n = row / p.TH, ty = row - n * p.TH;
    fn(n, ty, tx, count, t);
    t += count;
    tx = 0;
    ++row;
  }
}

// U[16][T][Cp] of the tiles [first, first + tiles); the rows of U past them are zeros.
void input_transform(const WinogradConv& p, const float* zeros, int64_t first, int64_t tiles, float* U) {
  const int64_t xs = p.T * p.Cp;
  const int64_t full = p.C / 8 * 8;
  const __m256i mask = lanes_below(p.C - full);
  for_each_run(p, first, tiles, [&](int64_t n, int64_t ty, int64_t tx0, int64_t count, int64_t t) {
    const float* row[4];
    for (int i = 0; i < 4; ++i) {
      const int64_t y = 2 * ty - p.ph + i;
      row[i] = y >= 0 && y < p.H ? p.input + (n * p.H + y) * p.W * p.C : zeros;
    }
    float* u = U + t * p.Cp;
    for (int64_t c = 0; c < full; c += 8) input_run<false>(p, row, tx0, count, c, mask, u + c, xs);
    // The last 8 channels' masked loads give zeros past C: the padding channels of U.
    if (full < p.C) input_run<true>(p, row, tx0, count, full, mask, u + full, xs);
  });
  const int64_t rows = (tiles + kMR - 1) / kMR * kMR;
  for (int64_t xi = 0; xi < 16; ++xi)
    std::memset(U + xi * xs + tiles * p.Cp, 0, static_cast<size_t>((rows - tiles) * p.Cp) * sizeof(float));
}

// M[6][16] (row stride ldm) = A[6][C] (row stride lda) * B[C][16] (row stride ldb). C: the
// compile-time channel count, or 0 for c_rt.
template <int CC>
inline void micro_kernel(int64_t c_rt, int64_t lda, int64_t ldb, int64_t ldm, const float* __restrict A,
                         const float* __restrict B, float* __restrict M) {
  const int64_t C = CC > 0 ? CC : c_rt;
  __m256 m00 = _mm256_setzero_ps(), m01 = _mm256_setzero_ps();
  __m256 m10 = _mm256_setzero_ps(), m11 = _mm256_setzero_ps();
  __m256 m20 = _mm256_setzero_ps(), m21 = _mm256_setzero_ps();
  __m256 m30 = _mm256_setzero_ps(), m31 = _mm256_setzero_ps();
  __m256 m40 = _mm256_setzero_ps(), m41 = _mm256_setzero_ps();
  __m256 m50 = _mm256_setzero_ps(), m51 = _mm256_setzero_ps();
  const float* a0 = A;
  const float* a1 = A + lda;
  const float* a2 = A + 2 * lda;
  const float* a3 = A + 3 * lda;
  const float* a4 = A + 4 * lda;
  const float* a5 = A + 5 * lda;
#pragma GCC unroll 8
  for (int64_t c = 0; c < C; ++c) {
    const __m256 b0 = _mm256_load_ps(B + c * ldb);
    const __m256 b1 = _mm256_load_ps(B + c * ldb + 8);
    __m256 a;
    a = _mm256_broadcast_ss(a0 + c), m00 = _mm256_fmadd_ps(a, b0, m00), m01 = _mm256_fmadd_ps(a, b1, m01);
    a = _mm256_broadcast_ss(a1 + c), m10 = _mm256_fmadd_ps(a, b0, m10), m11 = _mm256_fmadd_ps(a, b1, m11);
    a = _mm256_broadcast_ss(a2 + c), m20 = _mm256_fmadd_ps(a, b0, m20), m21 = _mm256_fmadd_ps(a, b1, m21);
    a = _mm256_broadcast_ss(a3 + c), m30 = _mm256_fmadd_ps(a, b0, m30), m31 = _mm256_fmadd_ps(a, b1, m31);
    a = _mm256_broadcast_ss(a4 + c), m40 = _mm256_fmadd_ps(a, b0, m40), m41 = _mm256_fmadd_ps(a, b1, m41);
    a = _mm256_broadcast_ss(a5 + c), m50 = _mm256_fmadd_ps(a, b0, m50), m51 = _mm256_fmadd_ps(a, b1, m51);
  }
  _mm256_store_ps(M + 0 * ldm, m00), _mm256_store_ps(M + 0 * ldm + 8, m01);
  _mm256_store_ps(M + 1 * ldm, m10), _mm256_store_ps(M + 1 * ldm + 8, m11);
  _mm256_store_ps(M + 2 * ldm, m20), _mm256_store_ps(M + 2 * ldm + 8, m21);
  _mm256_store_ps(M + 3 * ldm, m30), _mm256_store_ps(M + 3 * ldm + 8, m31);
  _mm256_store_ps(M + 4 * ldm, m40), _mm256_store_ps(M + 4 * ldm + 8, m41);
  _mm256_store_ps(M + 5 * ldm, m50), _mm256_store_ps(M + 5 * ldm + 8, m51);
}

// A range of memory to prefetch over the 16 products of a block, a 16th at each.
struct Prefetch {
  const char* begin = nullptr;
  int64_t lines = 0;
  int64_t step() const { return (lines + 15) / 16; }
};

// M[xi] = U[xi] * V[xi] for the first `rows` rows of U (a multiple of 6), prefetching the next
// block's input (into L2) and this block's output (into L1) on the way.
template <int CC>
void products(const WinogradConv& p, const float* U, float* M, int64_t rows, const Prefetch& in, const Prefetch& out) {
  const int64_t in_step = in.step(), out_step = out.step();
  for (int64_t xi = 0; xi < 16; ++xi) {
    for (int64_t l = xi * in_step; l < std::min(in.lines, (xi + 1) * in_step); ++l)
      _mm_prefetch(in.begin + l * 64, _MM_HINT_T1);
    for (int64_t l = xi * out_step; l < std::min(out.lines, (xi + 1) * out_step); ++l)
      _mm_prefetch(out.begin + l * 64, _MM_HINT_T0);
    const float* Ux = U + xi * p.T * p.Cp;
    const float* Vx = p.weight + xi * p.Cp * p.Kp;
    float* Mx = M + xi * p.T * p.Kp;
    for (int64_t k0 = 0; k0 < p.Kp; k0 += kNR)
      for (int64_t t0 = 0; t0 < rows; t0 += kMR)
        micro_kernel<CC>(p.Cp, p.Cp, p.Kp, p.Kp, Ux + t0 * p.Cp, Vx + k0, Mx + t0 * p.Kp + k0);
  }
}

// A^T m A of 8 output channels from k of one tile (m: its channel k of M[0], xs: the distance
// between the M[xi]), plus the bias, to the output pixels (y, x) .. (y + 1, x + 1) that exist.
template <bool Tail>
inline void output_tile(const float* m, int64_t xs, __m256 bias, __m256i mask, float* y00, int64_t row_stride,
                        int64_t K, bool second_row, bool second_col) {
  __m256 s[2][4];
  for (int j = 0; j < 4; ++j) {
    const __m256 m0 = _mm256_load_ps(m + (0 * 4 + j) * xs), m1 = _mm256_load_ps(m + (1 * 4 + j) * xs);
    const __m256 m2 = _mm256_load_ps(m + (2 * 4 + j) * xs), m3 = _mm256_load_ps(m + (3 * 4 + j) * xs);
    s[0][j] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
    s[1][j] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
  }
  for (int i = 0; i < 2; ++i) {
    if (i == 1 && !second_row) break;
    float* y = y00 + i * row_stride;
    store<Tail>(y, _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]), bias), mask);
    if (second_col)
      store<Tail>(y + K, _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3]), bias), mask);
  }
}

// Calls fn(pixel, t, second_row, second_col) for each output tile of the tiles [first, first +
// tiles): pixel, the offset of its top-left pixel in N x OH x OW x K; t, its row in the block;
// whether its second row and column are in the output.
template <typename Fn>
void each_output_tile(const WinogradConv& p, int64_t first, int64_t tiles, Fn&& fn) {
  for_each_run(p, first, tiles, [&](int64_t n, int64_t ty, int64_t tx0, int64_t count, int64_t t) {
    const bool second_row = 2 * ty + 1 < p.OH;
    const int64_t row = (n * p.OH + 2 * ty) * p.OW * p.K;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t tx = tx0 + i;
      fn(row + 2 * tx * p.K, t + i, second_row, 2 * tx + 1 < p.OW);
    }
  });
}

// The output of the tiles [first, first + tiles) from M.
void output_transform(const WinogradConv& p, const float* M, int64_t first, int64_t tiles) {
  const int64_t xs = p.T * p.Kp;
  const int64_t K = p.K, full = K / 8 * 8;
  const __m256i mask = lanes_below(K - full);
  const int64_t row_stride = p.OW * K;
  each_output_tile(p, first, tiles, [&](int64_t pixel, int64_t t, bool second_row, bool second_col) {
    const float* m = M + t * p.Kp;
    float* y = p.output + pixel;
    for (int64_t k = 0; k < full; k += 8) {
      const __m256 b = p.bias ? _mm256_loadu_ps(p.bias + k) : _mm256_setzero_ps();
      output_tile<false>(m + k, xs, b, mask, y + k, row_stride, K, second_row, second_col);
    }
    if (full < K) {
      const __m256 b = p.bias ? _mm256_maskload_ps(p.bias + full, mask) : _mm256_setzero_ps();
      output_tile<true>(m + full, xs, b, mask, y + full, row_stride, K, second_row, second_col);
    }
  });
}

// The input rows (all channels) of the tiles [first, first + tiles), and their output rows.
void block_ranges(const WinogradConv& p, int64_t first, int64_t tiles, Prefetch& in, Prefetch& out) {
  const int64_t last = first + tiles - 1;
  const int64_t row0 = first / p.TW, row1 = last / p.TW;  // tile rows over all images
  const int64_t n0 = row0 / p.TH, ty0 = row0 - n0 * p.TH, n1 = row1 / p.TH, ty1 = row1 - n1 * p.TH;
  const int64_t y0 = n0 * p.H + std::max<int64_t>(0, 2 * ty0 - p.ph);
  const int64_t y1 = n1 * p.H + std::min<int64_t>(p.H, 2 * ty1 - p.ph + 4);
  const int64_t pixels_in = p.W * p.C, pixels_out = p.OW * p.K;
  in.begin = reinterpret_cast<const char*>(p.input + y0 * pixels_in);
  in.lines = y1 > y0 ? ((y1 - y0) * pixels_in * static_cast<int64_t>(sizeof(float)) + 63) / 64 : 0;
  const int64_t o0 = n0 * p.OH + 2 * ty0, o1 = n1 * p.OH + std::min<int64_t>(p.OH, 2 * ty1 + 2);
  out.begin = reinterpret_cast<const char*>(p.output + o0 * pixels_out);
  out.lines = ((o1 - o0) * pixels_out * static_cast<int64_t>(sizeof(float)) + 63) / 64;
}

// For each block of [begin, end): its input transform into U, then fn(U, second, b, first,
// tiles) (second: M or Z, after U in the scratch; first, tiles: the block's tiles).
template <typename Fn>
void each_block(const WinogradConv& p, float* scratch, int64_t begin, int64_t end, Fn&& fn) {
  float* U = scratch;
  float* second = U + 16 * p.T * p.Cp;
  float* zeros = second + 16 * p.T * p.Kp;
  std::memset(zeros, 0, static_cast<size_t>(p.W * p.Cp) * sizeof(float));
  const int64_t total = p.N * p.TH * p.TW;
  for (int64_t b = begin; b < end; ++b) {
    const int64_t first = b * p.T, tiles = std::min(p.T, total - first);
    input_transform(p, zeros, first, tiles, U);
    fn(U, second, b, first, tiles);
  }
}

template <int CC>
void blocks(const WinogradConv& p, float* scratch, int64_t begin, int64_t end) {
  const int64_t total = p.N * p.TH * p.TW;
  each_block(p, scratch, begin, end, [&](const float* U, float* M, int64_t b, int64_t first, int64_t tiles) {
    Prefetch in, out, unused;
    if (b + 1 < end) block_ranges(p, first + p.T, std::min(p.T, total - first - p.T), in, unused);
    block_ranges(p, first, tiles, unused, out);
    products<CC>(p, U, M, (tiles + kMR - 1) / kMR * kMR, in, out);
    output_transform(p, M, first, tiles);
  });
}

// Z[16][T][Kp] = A dY A^T of grad_output's 2x2 tiles [first, first + tiles), 8 channels at a
// time: the pixels past OH and OW and the channels past K give zeros, up to Kp.
void grad_transform(const WinogradConv& p, int64_t first, int64_t tiles, float* Z) {
  const int64_t xs = p.T * p.Kp;
  const int64_t K = p.K, full = K / 8 * 8;
  const __m256i mask = lanes_below(K - full);
  const int64_t row_stride = p.OW * K;
  each_output_tile(p, first, tiles, [&](int64_t pixel, int64_t t, bool second_row, bool second_col) {
    const float* y = p.grad + pixel;
    float* z = Z + t * p.Kp;
    for (int64_t k = 0; k < p.Kp; k += 8) {
      // The pixel at offset `at` from the tile's first, 8 channels from k: zeros where it or
      // the channels are past the output (the last 8 channels' masked load: zeros past K).
      auto read = [&](bool present, int64_t at) {
        if (!present || k >= K) return _mm256_setzero_ps();
        return k < full ? load<false>(y + at + k, mask) : load<true>(y + at + k, mask);
      };
      const __m256 d[2][2] = {{read(true, 0), read(second_col, K)},
                              {read(second_row, row_stride), read(second_row && second_col, row_stride + K)}};
      // Down: e[i] = (dY0, dY0 + dY1, dY0 - dY1, -dY1) of each column, then the same across.
      __m256 e[4][2];
      for (int b = 0; b < 2; ++b) {
        e[0][b] = d[0][b];
        e[1][b] = _mm256_add_ps(d[0][b], d[1][b]);
        e[2][b] = _mm256_sub_ps(d[0][b], d[1][b]);
        e[3][b] = _mm256_sub_ps(_mm256_setzero_ps(), d[1][b]);
      }
      for (int i4 = 0; i4 < 4; ++i4) {
        _mm256_store_ps(z + (i4 * 4 + 0) * xs + k, e[i4][0]);
        _mm256_store_ps(z + (i4 * 4 + 1) * xs + k, _mm256_add_ps(e[i4][0], e[i4][1]));
        _mm256_store_ps(z + (i4 * 4 + 2) * xs + k, _mm256_sub_ps(e[i4][0], e[i4][1]));
        _mm256_store_ps(z + (i4 * 4 + 3) * xs + k, _mm256_sub_ps(_mm256_setzero_ps(), e[i4][1]));
      }
    }
  });
}

// S[R][16] (row stride lds) += sum over t < tiles of U[t][0..R) (row stride ldu) Z[t][0..16)
// (row stride ldz): R input channels by sixteen output channels, summed over the block's tiles
// in registers, added to S once.
template <int R>
inline void weight_grad_kernel(int64_t tiles, int64_t ldu, int64_t ldz, int64_t lds, const float* __restrict U,
                               const float* __restrict Z, float* __restrict S) {
  __m256 s[R][2];
  for (int r = 0; r < R; ++r) s[r][0] = s[r][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t t = 0; t < tiles; ++t) {
    const __m256 z0 = _mm256_load_ps(Z + t * ldz), z1 = _mm256_load_ps(Z + t * ldz + 8);
    const float* u = U + t * ldu;
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(u + r);
      s[r][0] = _mm256_fmadd_ps(a, z0, s[r][0]);
      s[r][1] = _mm256_fmadd_ps(a, z1, s[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* row = S + r * lds;
    _mm256_store_ps(row, _mm256_add_ps(_mm256_load_ps(row), s[r][0]));
    _mm256_store_ps(row + 8, _mm256_add_ps(_mm256_load_ps(row + 8), s[r][1]));
  }
}

}  // namespace

void winograd_weight_transform_avx2(const float* weight, int64_t sk, int64_t sc, int64_t sh, int64_t sw,
                                    const WinogradConv& p, float* out, int64_t begin, int64_t end) {
  const int64_t plane = p.Cp * p.Kp;
  const int64_t at[9] = {0, sw, 2 * sw, sh, sh + sw, sh + 2 * sw, 2 * sh, 2 * sh + sw, 2 * sh + 2 * sw};
  for (int64_t k0 = begin * kNR; k0 < end * kNR; k0 += kNR) {
    // One 64-byte line of each V[xi] row c at a time, 16 windows read in step along c.
    for (int64_t c = 0; c < p.Cp; ++c) {
      alignas(32) float g[9][kNR];
      const int64_t n = c < p.C ? std::min(kNR, p.K - k0) : 0;
      for (int64_t kk = 0; kk < n; ++kk) {
        const float* w = weight + (k0 + kk) * sk + c * sc;
        for (int e = 0; e < 9; ++e) g[e][kk] = w[at[e]];
      }
      if (n < kNR)
        for (int e = 0; e < 9; ++e) std::fill(g[e] + n, g[e] + kNR, 0.0f);
      // G g G^T in double, rounded once: G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. Zero
      // windows past C and K give zeros.
      alignas(32) float r[16][kNR];
      const __m256d half = _mm256_set1_pd(0.5);
      for (int q = 0; q < kNR; q += 4) {
        __m256d t[4][3];
        for (int j = 0; j < 3; ++j) {
          const __m256d g0 = _mm256_cvtps_pd(_mm_load_ps(&g[j][q]));
          const __m256d g1 = _mm256_cvtps_pd(_mm_load_ps(&g[3 + j][q]));
          const __m256d g2 = _mm256_cvtps_pd(_mm_load_ps(&g[6 + j][q]));
          t[0][j] = g0;
          t[1][j] = _mm256_mul_pd(half, _mm256_add_pd(_mm256_add_pd(g0, g1), g2));
          t[2][j] = _mm256_mul_pd(half, _mm256_add_pd(_mm256_sub_pd(g0, g1), g2));
          t[3][j] = g2;
        }
        for (int i = 0; i < 4; ++i) {
          const __m256d s1 = _mm256_mul_pd(half, _mm256_add_pd(_mm256_add_pd(t[i][0], t[i][1]), t[i][2]));
          const __m256d s2 = _mm256_mul_pd(half, _mm256_add_pd(_mm256_sub_pd(t[i][0], t[i][1]), t[i][2]));
          _mm_store_ps(&r[i * 4 + 0][q], _mm256_cvtpd_ps(t[i][0]));
          _mm_store_ps(&r[i * 4 + 1][q], _mm256_cvtpd_ps(s1));
          _mm_store_ps(&r[i * 4 + 2][q], _mm256_cvtpd_ps(s2));
          _mm_store_ps(&r[i * 4 + 3][q], _mm256_cvtpd_ps(t[i][2]));
        }
      }
      for (int xi = 0; xi < 16; ++xi) std::memcpy(out + xi * plane + c * p.Kp + k0, r[xi], sizeof r[xi]);
    }
  }
}

void winograd_blocks_avx2(const WinogradConv& p, float* scratch, int64_t begin, int64_t end) {
  switch (p.Cp) {
    case 16: blocks<16>(p, scratch, begin, end); break;
    case 32: blocks<32>(p, scratch, begin, end); break;
    case 64: blocks<64>(p, scratch, begin, end); break;
    case 128: blocks<128>(p, scratch, begin, end); break;
    case 256: blocks<256>(p, scratch, begin, end); break;
    default: blocks<0>(p, scratch, begin, end); break;
  }
}

void winograd_weight_grad_blocks_avx2(const WinogradConv& p, float* scratch, float* S, int64_t begin, int64_t end) {
  each_block(p, scratch, begin, end, [&](const float* U, float* Z, int64_t, int64_t first, int64_t tiles) {
    grad_transform(p, first, tiles, Z);
    for (int64_t xi = 0; xi < 16; ++xi) {
      const float* Ux = U + xi * p.T * p.Cp;
      const float* Zx = Z + xi * p.T * p.Kp;
      float* Sx = S + xi * p.Cp * p.Kp;
      // Six channels at a time (twelve sums in registers), then the 2 or 4 left of Cp.
      const int64_t six = p.Cp / 6 * 6;
      for (int64_t k0 = 0; k0 < p.Kp; k0 += kNR) {
        for (int64_t c0 = 0; c0 < six; c0 += 6)
          weight_grad_kernel<6>(tiles, p.Cp, p.Kp, p.Kp, Ux + c0, Zx + k0, Sx + c0 * p.Kp + k0);
        if (p.Cp - six == 4)
          weight_grad_kernel<4>(tiles, p.Cp, p.Kp, p.Kp, Ux + six, Zx + k0, Sx + six * p.Kp + k0);
        else if (p.Cp - six == 2)
          weight_grad_kernel<2>(tiles, p.Cp, p.Kp, p.Kp, Ux + six, Zx + k0, Sx + six * p.Kp + k0);
      }
    }
  });
}

}  // namespace accelkit::cpu::detail
