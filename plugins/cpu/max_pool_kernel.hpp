// Internal to the CPU plugin's max_pool2d kernel (operator_kernels.cpp): the element loop per
// ISA. Plain data only, like fused_adamw_kernel.hpp: the ISA translation unit includes nothing
// else, so no inline function built for AVX2 can be picked by the linker for other code.
#pragma once

#include <cstdint>

namespace accelkit::cpu::detail {

// 2x2 windows at stride 2 over contiguous NCHW float planes of H x W, every window inside the
// plane (OH = H / 2, OW = W / 2, rounded down). Output rows [begin, end) of the N*C*OH rows of
// OW, each element the largest of its window and its index in the plane (h * W + w), chosen as
// LibTorch's kernel chooses: the first largest in row-major window order, a NaN over any number
// (the last NaN when several).
struct MaxPool2x2 {
  const float* in;
  float* out;
  int64_t* indices;
  int64_t H, W, OH, OW;
};

// The gradient of such a pooling: planes [begin, end) of the N*C planes of grad_input (H x W),
// each element the output gradient of the window whose index (h * W + w in the plane) names it,
// 0 elsewhere - as LibTorch's kernel leaves it, which adds each gradient to a zeroed plane (so
// -0.0 arrives as +0.0). Returns how many indices named an element of their own window: fewer
// than the windows means indices this loop cannot place, and the caller runs LibTorch's kernel.
struct MaxPool2x2Backward {
  const float* grad_output;
  const int64_t* indices;
  float* grad_input;
  int64_t H, W, OH, OW;
};

#if defined(__x86_64__) || defined(_M_X64)
void max_pool_2x2_avx2(const MaxPool2x2& p, int64_t begin, int64_t end);
int64_t max_pool_2x2_backward_avx2(const MaxPool2x2Backward& p, int64_t begin, int64_t end);
#endif

}  // namespace accelkit::cpu::detail
