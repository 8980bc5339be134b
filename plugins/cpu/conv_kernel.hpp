// Internal to the CPU plugin's convolution_backward kernel (operator_kernels.cpp): the loop per
// ISA. Plain data only, like max_pool_kernel.hpp: the ISA translation unit includes nothing
// else, so no inline function built for AVX2 can be picked by the linker for other code.
#pragma once

#include <cstdint>

namespace accelkit::cpu::detail {

// The weight (and bias) gradient of a convolution with one input channel, stride 1, no padding
// or dilation, one group: grad_weight[oc][kh][kw] = sum over n, oh, ow of
// grad_output[n][oc][oh][ow] * input[n][oh + kh][ow + kw], grad_bias[oc] = the sum of
// grad_output[n][oc]. Contiguous fp32: input N x H x W, grad_output N x OC x OH x OW with
// OH = H - KH + 1, OW = W - KW + 1, grad_weight OC x KH x KW, grad_bias OC (or null: not
// wanted). The rows of grad_weight [begin, end) of the OC*KH rows of KW; each row's sum runs in
// the same order whatever the split, so the result does not depend on the thread count.
struct ConvWeightGrad1 {
  const float* input;
  const float* grad_output;
  float* grad_weight;
  float* grad_bias;
  int64_t N, OC, H, W, KH, KW, OH, OW;
};

// The widest kernel row the loop takes (its running sums stay in registers).
inline constexpr int64_t kConvWeightGradMaxKW = 7;

#if defined(__x86_64__) || defined(_M_X64)
void conv_weight_grad_c1_avx2(const ConvWeightGrad1& p, int64_t begin, int64_t end);
#endif

}  // namespace accelkit::cpu::detail
