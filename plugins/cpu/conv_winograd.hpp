// Internal to the CPU plugin: fp32 convolutions with a 3x3 window, stride 1 and padding 0 or 1
// (a ResNet's body) by Winograd's F(2x2,3x3) (winograd_kernel.hpp), channels-last, on CPUs with
// AVX2 and FMA. ResNet-20's layers at batch 128 on an AVX2-only Zen 3 at 2 threads run
// 1.4-1.8x as fast as LibTorch's oneDNN kernel, within fp32's rounding of fp64 (the weights are
// transformed in fp64, the sums over channels taken with FMA; on those layers its largest error
// was 0.4x oneDNN's, over random shapes of the same order as LibTorch's).
//
// The input gradient of such a convolution is the same kind of convolution: grad_output with
// the window turned by 180 degrees, input and output channels swapped, and padding 2 - p. The
// weight gradient takes the same input tiles, 16 products per tile and channel pair instead of
// 36 (winograd_kernel.hpp).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace accelkit::cpu::conv_winograd {

// Whether forward() and input_grad() take this convolution: fp32 4-d CPU tensors (strided,
// any layout), a 3x3 window over all input channels (one group), stride 1, dilation 1, padding 0
// or 1 in each dimension, not transposed, a non-empty output, and a CPU with AVX2 and FMA.
bool eligible(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
              at::IntArrayRef dilation, bool transposed, int64_t groups);

// The convolution of input with weight (and bias, fp32, one value per output channel, or
// none), for what eligible() took; the result is channels-last.
at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                   at::IntArrayRef padding);

// The gradient of that convolution's input (of input_sizes) from grad_output; channels-last.
at::Tensor input_grad(const at::Tensor& grad_output, const at::Tensor& weight, at::IntArrayRef input_sizes,
                      at::IntArrayRef padding);

// The gradient of that convolution's weight from grad_output and its input; channels-last:
// G^T [sum over tiles of (B^T d B) .* (A dY A^T)] G, the sums over
// the tiles in fp32 (per block of tiles in registers, then per thread), the rest in fp64.
at::Tensor weight_grad(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                       at::IntArrayRef padding);

}  // namespace accelkit::cpu::conv_winograd
