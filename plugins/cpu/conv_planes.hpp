// Internal to the CPU plugin's GEMM path for convolutions (conv_gemm.hpp): its NCHW form,
// image by image.
//
// The GEMM path's own form gathers one patch matrix for the whole batch, in channels-last
// order, and multiplies it once. For an NCHW program that costs layout copies of the input,
// grad_output, weight and result, and a patch matrix of the whole batch that leaves the caches
// between its writing and its reading (pytorch/examples' MNIST conv2 10 -> 20 5x5 at batch 64:
// 4 MB, written and read twice in a backward pass). Here, as in LibTorch's slow_conv2d, each
// image is one task: its patches [C*KH*KW, OH*OW], in (c, kh, kw) order, gathered from its NCHW
// planes into a buffer that stays in the cache, and multiplied by the weight as it lies, so
// every result comes out NCHW:
//   forward        out_n [O, P]  = W [O, K] @ patches(x_n)
//   grad_weight    W'    [O, K] += G_n [O, P] @ patches(x_n)^T
//   grad_input     x_n'          = scatter(W^T @ G_n)
// (P = OH*OW, K = C*KH*KW) and a transposed convolution the same with the roles of forward and
// grad_input swapped. The products are the BLAS sgemm LibTorch calls (MKL in the PyTorch wheel,
// libblas.so.3 for Debian's), found in the process; within a task it runs on that task's thread.
//
// The weight and bias gradients are summed in a fixed number of parts of consecutive images
// (bias sums in fp64), added up in order, so their grouping does not follow the thread count
// (the BLAS's own rounding may: MKL's does without its reproducibility mode).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <tuple>

#include "conv_gemm.hpp"

namespace accelkit::cpu::conv_planes {

// Whether this process has a BLAS sgemm to call. Without one, conv_gemm's own form serves.
bool available();

// The form serves convolutions with at least this many pixels on the small side (OH*OW; a
// transposed one's input pixels). With fewer, a product per few images is too narrow for the
// BLAS: at batch 64 on 2 threads of an AVX-512 Xeon, DCGAN's 7x7 and 3x3 layers ran 1.6-3x
// slower this way than as one product over the whole batch, its 14x14 and 32x32 ones and
// MNIST's 8x8 and 24x24 ones faster.
inline constexpr int64_t kMinPixels = 64;

// For a convolution conv_gemm::fit_any() took whose input, weight and (backward) grad_output are
// NCHW-contiguous, with results NCHW (conv_gemm decides).
at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                   const conv_gemm::Geometry& g);
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                        const at::Tensor& weight, const conv_gemm::Geometry& g,
                                                        std::array<bool, 3> output_mask);

}  // namespace accelkit::cpu::conv_planes
