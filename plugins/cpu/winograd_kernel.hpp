// Internal to the CPU plugin's Winograd convolution (conv_winograd.hpp): the loops per ISA.
// Plain data only, like conv_kernel.hpp: the ISA translation unit includes nothing else, so no
// inline function built for AVX2 can be picked by the linker for other code.
//
// F(2x2,3x3): each 2x2 tile of the output comes from a 4x4 tile d of the padded input as
// A^T [sum over c of (G g G^T) .* (B^T d B)] A, 16 products per (tile, c, k) instead of 36. The
// tiles are taken in blocks of T: per block, the input transform of its tiles into
// U[16][T][Cp], 16 matrix products M[xi] = U[xi] * V[xi] (V[16][Cp][Kp]: the transformed
// weights), and the output transform of M into the output. U and M of one block stay in L2.
#pragma once

#include <cstdint>

namespace accelkit::cpu::detail {

// One stride-1 convolution with a 3x3 window, fp32, channels-last: input N x H x W x C, output
// N x OH x OW x K with OH = H + 2 ph - 2, OW = W + 2 pw - 2 (ph, pw: the zero padding on each
// side, 0, 1 or 2), weight the transformed weights (winograd_weight_transform_avx2), bias K
// values or null. C is padded with zeros to Cp (a multiple of 8) in U and V, K to Kp (a
// multiple of 16) in V and M; only the K real channels are written out.
struct WinogradConv {
  const float* input = nullptr;
  const float* weight = nullptr;  // [16][Cp][Kp], 32-byte aligned
  const float* bias = nullptr;
  float* output = nullptr;
  const float* grad = nullptr;  // the weight gradient's grad_output: N x OH x OW x K
  int64_t N = 0, H = 0, W = 0, C = 0, K = 0;
  int64_t ph = 0, pw = 0;
  int64_t OH = 0, OW = 0;
  int64_t Cp = 0, Kp = 0;
  int64_t TH = 0, TW = 0;  // tiles down and across one image: OH and OW halved, rounded up
  int64_t T = 0;           // tiles per block, a multiple of 6 (the product's row step)
  int64_t blocks = 0;      // N * TH * TW tiles in blocks of T
};

// The plan for these sizes; the pointers are left for the caller.
inline WinogradConv winograd_plan(int64_t N, int64_t H, int64_t W, int64_t C, int64_t K, int64_t ph, int64_t pw) {
  WinogradConv p;
  p.N = N, p.H = H, p.W = W, p.C = C, p.K = K, p.ph = ph, p.pw = pw;
  p.OH = H + 2 * ph - 2;
  p.OW = W + 2 * pw - 2;
  p.Cp = (C + 7) / 8 * 8;
  p.Kp = (K + 15) / 16 * 16;
  p.TH = (p.OH + 1) / 2;
  p.TW = (p.OW + 1) / 2;
  // 48 tiles for 16 channels in and out, 24 above: U and M of a block within ~200 KiB, in L2
  // with the block's part of V (ResNet-20's layers on a Zen 3 core, 512 KiB of L2).
  p.T = p.Cp + p.Kp <= 32 ? 48 : 24;
  const int64_t tiles = N * p.TH * p.TW;
  if (tiles < p.T) p.T = (tiles + 5) / 6 * 6;
  p.blocks = p.T > 0 ? (tiles + p.T - 1) / p.T : 0;
  return p;
}

// The floats of one thread's scratch for winograd_blocks_avx2: U, M and a row of zeros (the
// padding rows). The caller aligns it to 64 bytes.
inline int64_t winograd_scratch_floats(const WinogradConv& p) { return 16 * p.T * (p.Cp + p.Kp) + p.W * p.Cp; }

#if defined(__x86_64__) || defined(_M_X64)
// V[xi][c][k] = (G g G^T)[xi] of the 3x3 window g[i][j] = weight[k * sk + c * sc + i * sh + j * sw]
// (any strides, negative ones included: a flipped window), for the output channels k in
// [16 begin, 16 end) of [0, Kp); zeros for c >= C and k >= K. out: [16][Cp][Kp].
void winograd_weight_transform_avx2(const float* weight, int64_t sk, int64_t sc, int64_t sh, int64_t sw,
                                    const WinogradConv& p, float* out, int64_t begin, int64_t end);

// The blocks [begin, end) of p.blocks, into p.output. scratch: winograd_scratch_floats(p)
// floats, 64-byte aligned, this call's alone.
void winograd_blocks_avx2(const WinogradConv& p, float* scratch, int64_t begin, int64_t end);

// The weight gradient's part from the tiles of blocks [begin, end): adds to S[16][Cp][Kp]
// (64-byte aligned) the sums over those tiles of U[xi][t][c] Z[xi][t][k], U = B^T d B of p.input
// as above and Z = A dY A^T of p.grad's 2x2 tiles (zeros past OH, OW and K). The gradient of
// the 3x3 window (c, k) is G^T S[.][c][k] G (winograd_weight_grad_window). scratch: as for
// winograd_blocks_avx2 (Z takes M's place).
void winograd_weight_grad_blocks_avx2(const WinogradConv& p, float* scratch, float* S, int64_t begin, int64_t end);
#endif

// G^T s G: the 3x3 window's gradient from the 16 sums s[xi] of one (c, k) (xi = 4 i + j, i down),
// G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
inline void winograd_weight_grad_window(const double s[16], double g[3][3]) {
  double h[3][4];
  for (int j = 0; j < 4; ++j) {
    const double s0 = s[j], s1 = s[4 + j], s2 = s[8 + j], s3 = s[12 + j];
    h[0][j] = s0 + 0.5 * (s1 + s2);
    h[1][j] = 0.5 * (s1 - s2);
    h[2][j] = 0.5 * (s1 + s2) + s3;
  }
  for (int a = 0; a < 3; ++a) {
    g[a][0] = h[a][0] + 0.5 * (h[a][1] + h[a][2]);
    g[a][1] = 0.5 * (h[a][1] - h[a][2]);
    g[a][2] = 0.5 * (h[a][1] + h[a][2]) + h[a][3];
  }
}

}  // namespace accelkit::cpu::detail
