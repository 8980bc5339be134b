// Internal to the CPU plugin's batch_norm kernels (batch_norm_op.cpp): the element loops of
// training-mode batch normalisation over fp32, per ISA. Plain data only, like
// max_pool_kernel.hpp: the ISA translation unit includes nothing else.
//
// Two layouts. Rows: `rows` rows of C contiguous channels (channels-last, N*H*W rows; or [N, C]).
// Planes: planes of `n` contiguous elements, plane p of channel p % C (NCHW). Sums are taken in
// float over short runs and added up in double, each element less a per-channel shift (the
// channel's first element), so the variance is not the difference of two large sums.
#pragma once

#include <cstdint>

namespace accelkit::cpu::detail {

#if defined(__x86_64__) || defined(_M_X64)
// sum[c] += x - shift[c], sq[c] += (x - shift[c])^2 over the rows.
void bn_stats_rows_avx2(const float* x, int64_t rows, int64_t C, const float* shift, double* sum, double* sq);
// y = (x - shift[c]) * scale[c] + offset[c] over the rows, the shift an element of the channel
// (not x * scale + (offset - mean * scale), which loses the digits the mean and the deviation
// share when the mean is large).
void bn_apply_rows_avx2(const float* x, float* y, int64_t rows, int64_t C, const float* shift, const float* scale,
                        const float* offset);
// sum_dy[c] += dy, dot[c] += dy * (x - mean[c]) over the rows.
void bn_grad_stats_rows_avx2(const float* dy, const float* x, int64_t rows, int64_t C, const float* mean,
                             double* sum_dy, double* dot);
// dx = dy * a[c] + (x - mean[c]) * k[c] + d[c] over the rows.
void bn_grad_input_rows_avx2(const float* dy, const float* x, float* dx, int64_t rows, int64_t C, const float* a,
                             const float* k, const float* mean, const float* d);

// The forward's two over planes [p0, p1) of n elements (plane p: channel p % C, at x + p * n);
// the sums of plane p go to sum[p] and sq[p] (not added to). The NCHW gradient is LibTorch's.
void bn_stats_planes_avx2(const float* x, int64_t p0, int64_t p1, int64_t n, int64_t C, const float* shift,
                          double* sum, double* sq);
void bn_apply_planes_avx2(const float* x, float* y, int64_t p0, int64_t p1, int64_t n, int64_t C, const float* shift,
                          const float* scale, const float* offset);
#endif

}  // namespace accelkit::cpu::detail
