// Internal to the CPU plugin's operator kernels (operator_kernels.cpp): 2-d convolutions with
// one pixel on their small side - a plain one whose output is 1x1 (a discriminator's one-logit
// head, a classifier's last convolution) or a transposed one whose input is 1x1 (a generator's
// first layer, from its noise vector). Such a layer is a matrix product, which oneDNN's
// convolution kernels - vectorised over channels and pixels - run at a fraction of the rate of
// a GEMM: pytorch/examples' DCGAN generator's first layer (100 -> 256, 4x4) took 0.88 ms
// forward and 1.78 ms backward at batch 64 on 2 threads, 0.39 and 0.41 ms here. Here each is
// one GEMM (LibTorch's at::mm, the BLAS it was built with) over the layer's patches, one row per
// output pixel, gathered (im2col) or scattered (col2im) by plain loops.
//
// The same path serves any other fp32 convolution of one group whose patch matrix fits
// (fit_any): operator_kernels.cpp times it against LibTorch's kernel per shape and keeps the
// faster (conv_choice.hpp). The patches are gathered in (kh, kw, c) order from a channels-last
// image, runs of C values, so a channels-last program's layers need no copy of their input.
// An NCHW convolution with at least conv_planes::kMinPixels output pixels (a transposed one's
// input pixels) is computed image by image instead, in its own layout (conv_planes.hpp).
//
// Forward and backward, plain and transposed, any stride, padding, dilation and output padding,
// one group, fp32, NCHW or channels-last (the result has the layout LibTorch's own kernel gives:
// channels-last where the input or weight suggests it). Equal to LibTorch's up to the order of
// the sums.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <tuple>

namespace accelkit::cpu::conv_gemm {

// The largest patch matrix the path makes (elements): above it, LibTorch's kernel.
inline constexpr int64_t kMaxPatchElements = int64_t{16} << 20;  // 64 MiB of fp32

// The arguments of aten::convolution / convolution_backward that the path reads.
struct ConvArgs {
  at::IntArrayRef stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

// A convolution in its forward sense: an image of C planes H x W, windows KH x KW, one output
// pixel of OH x OW per window. For a transposed convolution the image is its output and the
// windows' pixels its input.
struct Geometry {
  int64_t N = 0, C = 0, H = 0, W = 0, KH = 0, KW = 0, OH = 0, OW = 0;
  int64_t stride[2] = {1, 1}, pad[2] = {0, 0}, dil[2] = {1, 1}, out_pad[2] = {0, 0};
  int64_t out_channels = 0;  // the layer's output channels
  bool transposed = false;
  int64_t rows() const { return N * OH * OW; }
  int64_t patch() const { return C * KH * KW; }
  // The layer's output shape [N, C, H, W].
  std::array<int64_t, 4> output_shape() const {
    return transposed ? std::array<int64_t, 4>{N, C, H, W} : std::array<int64_t, 4>{N, out_channels, OH, OW};
  }
};

// The geometry of this convolution where the path can compute it (forward and, with a
// grad_output of its output_shape(), backward): fp32 on the CPU, strided 4-d tensors, one group,
// a patch matrix within kMaxPatchElements. nullopt: LibTorch's.
// A convolution argument's two values (height, width) from one value for both or two; `empty`
// for both where the list is empty (an output_padding left out). False for any other length.
bool read_pair(at::IntArrayRef v, int64_t empty, int64_t out[2]);

// A 4-d fp32 CPU tensor in plain strided memory (not quantized, oneDNN's, or a lazy negative or
// conjugate view): what the plugin's convolution paths read.
bool plain_fp32(const at::Tensor& t);

std::optional<Geometry> fit_any(const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a);

// One pixel on the small side: a plain convolution's 1x1 output, a transposed one's 1x1 input.
inline bool one_pixel(const Geometry& g) { return g.OH * g.OW == 1; }

// A bf16 convolution (autocast's, on a CPU with AVX512_BF16) whose weight gradient weight_grad()
// computes: what fit_any() takes, in bf16, with grad_output of the output's shape - on LibTorch
// 2.x (1.x's bf16 at::mm sums in bf16: compat::kBf16MatmulSumsInFp32).
std::optional<Geometry> fit_bf16_weight_grad(const at::Tensor& grad_output, const at::Tensor& input,
                                             const at::Tensor& weight, const ConvArgs& a);

// The weight gradient alone, one GEMM over the patches in the tensors' own dtype (fp32, or bf16
// with fp32 sums: LibTorch's at::mm), in the layout LibTorch's kernel gives it.
at::Tensor weight_grad(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                       const Geometry& g);


// aten::convolution for what fit_any() took.
at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                   const Geometry& g);

// aten::convolution_backward for what fit_any() took: {grad_input, grad_weight, grad_bias}, each
// undefined where output_mask leaves it out.
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                        const at::Tensor& weight, const Geometry& g,
                                                        std::array<bool, 3> output_mask);

}  // namespace accelkit::cpu::conv_gemm
