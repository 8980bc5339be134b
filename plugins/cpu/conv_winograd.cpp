// The CPU plugin's Winograd convolution (conv_winograd.hpp): the LibTorch side. The weights are
// transformed per call (16 x C x K values, a small part of the work at any batch the path is
// worth taking for), the tiles' blocks split over LibTorch's threads, each with its own scratch.
#include "conv_winograd.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "conv_gemm.hpp"
#include "fused_adamw.hpp"
#include "winograd_kernel.hpp"

namespace accelkit::cpu::conv_winograd {

namespace {

struct FreeFloats {
  void operator()(float* p) const { std::free(p); }
};

// This thread's buffer `Use` of at least `floats` floats, 64-byte aligned, kept between calls:
// the same (warm) pages call after call, no page faults of a fresh mapping per call.
enum Use { kWeights, kBlocks, kSums };
template <Use>
float* thread_buffer(int64_t floats) {
  thread_local std::unique_ptr<float, FreeFloats> buffer;
  thread_local int64_t size = 0;
  if (floats > size) {
    buffer.reset();
    const size_t bytes = (static_cast<size_t>(floats) * sizeof(float) + 63) / 64 * 64;
    buffer.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    TORCH_CHECK(buffer, "conv_winograd: no memory for ", bytes, " bytes of scratch");
    size = floats;
  }
  return buffer.get();
}

// The convolution of x (N x C x H x W, channels-last contiguous) with the K x C x 3 x 3 window
// at `weight` with strides sk, sc, sh, sw, padding ph, pw, plus bias (K values, or null).
at::Tensor run(const at::Tensor& x, const float* weight, int64_t sk, int64_t sc, int64_t sh, int64_t sw, int64_t K,
               const float* bias, int64_t ph, int64_t pw) {
  detail::WinogradConv p = detail::winograd_plan(x.size(0), x.size(2), x.size(3), x.size(1), K, ph, pw);
  TORCH_CHECK(p.OH > 0 && p.OW > 0, "conv_winograd: an empty output");
  at::Tensor out = at::empty({p.N, K, p.OH, p.OW}, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  if (out.numel() == 0) return out;
#if defined(__x86_64__) || defined(_M_X64)
  // The transformed weights: this (calling) thread's, read by all while it waits.
  float* vp = thread_buffer<kWeights>(16 * p.Cp * p.Kp);
  // Blocks of 16 output channels, at least 65536 windows to a task (fewer: one thread).
  at::parallel_for(0, p.Kp / 16, std::max<int64_t>(1, 4096 / p.Cp), [&](int64_t begin, int64_t end) {
    detail::winograd_weight_transform_avx2(weight, sk, sc, sh, sw, p, vp, begin, end);
  });
  p.input = x.data_ptr<float>();
  p.weight = vp;
  p.bias = bias;
  p.output = out.data_ptr<float>();
  const int64_t scratch = detail::winograd_scratch_floats(p);
  at::parallel_for(0, p.blocks, 1, [&](int64_t begin, int64_t end) {
    detail::winograd_blocks_avx2(p, thread_buffer<kBlocks>(scratch), begin, end);
  });
#else
  (void)weight, (void)sk, (void)sc, (void)sh, (void)sw, (void)bias;
  TORCH_CHECK(false, "conv_winograd: an x86 CPU with AVX2 and FMA only");
#endif
  return out;
}

// Reads padding into pad, and checks that grad_output (N x K x OH x OW) fits an input of
// input_sizes (N x C x H x W) and the K x C x 3 x 3 weight.
void check_grad_sizes(const at::Tensor& grad_output, at::IntArrayRef input_sizes, const at::Tensor& weight,
                      at::IntArrayRef padding, int64_t pad[2]) {
  TORCH_CHECK(conv_gemm::read_pair(padding, 0, pad), "conv_winograd: padding of one or two values");
  TORCH_CHECK(input_sizes.size() == 4 && grad_output.dim() == 4 && weight.dim() == 4, "conv_winograd: 4-d sizes");
  TORCH_CHECK(grad_output.size(0) == input_sizes[0] && grad_output.size(1) == weight.size(0) &&
                  input_sizes[1] == weight.size(1) && grad_output.size(2) == input_sizes[2] + 2 * pad[0] - 2 &&
                  grad_output.size(3) == input_sizes[3] + 2 * pad[1] - 2,
              "conv_winograd: grad_output ", grad_output.sizes(), " does not fit input ", input_sizes);
}

}  // namespace

bool eligible(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
              at::IntArrayRef dilation, bool transposed, int64_t groups) {
  if (transposed || groups != 1 || !conv_gemm::plain_fp32(input) || !conv_gemm::plain_fp32(weight)) return false;
  int64_t s[2], pad[2], d[2];
  if (!conv_gemm::read_pair(stride, 1, s) || !conv_gemm::read_pair(padding, 0, pad) ||
      !conv_gemm::read_pair(dilation, 1, d))
    return false;
  for (int i = 0; i < 2; ++i)
    if (s[i] != 1 || d[i] != 1 || pad[i] < 0 || pad[i] > 1) return false;
  if (weight.size(2) != 3 || weight.size(3) != 3 || weight.size(1) != input.size(1) || weight.size(0) < 1 ||
      input.numel() == 0)
    return false;
  if (input.size(2) + 2 * pad[0] < 3 || input.size(3) + 2 * pad[1] < 3) return false;
  static const bool isa = adamw_isa_supported(AdamWIsa::avx2);  // AVX2 and FMA, as the kernel is built
  return isa;
}

at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                   at::IntArrayRef padding) {
  int64_t pad[2];
  TORCH_CHECK(conv_gemm::read_pair(padding, 0, pad), "conv_winograd: padding of one or two values");
  const int64_t K = weight.size(0);
  const at::Tensor x = input.contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor b;
  if (bias.has_value() && bias->defined()) {
    b = bias->contiguous();
    TORCH_CHECK(b.scalar_type() == at::kFloat && b.numel() == K, "conv_winograd: an fp32 bias of ", K, " values");
  }
  return run(x, weight.data_ptr<float>(), weight.stride(0), weight.stride(1), weight.stride(2), weight.stride(3), K,
             b.defined() ? b.data_ptr<float>() : nullptr, pad[0], pad[1]);
}

at::Tensor input_grad(const at::Tensor& grad_output, const at::Tensor& weight, at::IntArrayRef input_sizes,
                      at::IntArrayRef padding) {
  int64_t pad[2];
  check_grad_sizes(grad_output, input_sizes, weight, padding, pad);
  const int64_t C = weight.size(1);
  const at::Tensor g = grad_output.contiguous(at::MemoryFormat::ChannelsLast);
  // The window turned by 180 degrees, its channel axes swapped: new window (c, k) row i column
  // j is weight[k][c][2 - i][2 - j]. The padding 2 - p brings the output back to the input's size.
  const float* w = weight.data_ptr<float>() + 2 * weight.stride(2) + 2 * weight.stride(3);
  return run(g, w, weight.stride(1), weight.stride(0), -weight.stride(2), -weight.stride(3), C, nullptr, 2 - pad[0],
             2 - pad[1]);
}

at::Tensor weight_grad(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                       at::IntArrayRef padding) {
  int64_t pad[2];
  check_grad_sizes(grad_output, input.sizes(), weight, padding, pad);
  const int64_t K = weight.size(0), C = weight.size(1);
  const at::Tensor x = input.contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor g = grad_output.contiguous(at::MemoryFormat::ChannelsLast);
  // Channels-last, as LibTorch's kernel makes it for a channels-last input.
  at::Tensor out = at::empty(weight.sizes(), weight.options().memory_format(at::MemoryFormat::ChannelsLast));
  detail::WinogradConv p = detail::winograd_plan(x.size(0), x.size(2), x.size(3), C, K, pad[0], pad[1]);
  if (p.blocks == 0) return out.zero_();
#if defined(__x86_64__) || defined(_M_X64)
  p.input = x.data_ptr<float>();
  p.grad = g.data_ptr<float>();
  // One part of the blocks per thread, each summed into its own S[16][Cp][Kp], then added up.
  const int64_t parts = std::min<int64_t>(at::get_num_threads(), p.blocks);
  const int64_t plane = 16 * p.Cp * p.Kp;
  float* sums = thread_buffer<kSums>(parts * plane);
  const int64_t scratch = detail::winograd_scratch_floats(p);
  at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* S = sums + i * plane;
      std::fill(S, S + plane, 0.0f);
      detail::winograd_weight_grad_blocks_avx2(p, thread_buffer<kBlocks>(scratch), S, p.blocks * i / parts,
                                               p.blocks * (i + 1) / parts);
    }
  });
  float* w = out.data_ptr<float>();
  const int64_t sk = out.stride(0), sc = out.stride(1), sh = out.stride(2), sw = out.stride(3);
  at::parallel_for(0, K, std::max<int64_t>(1, 4096 / (C * parts)), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k)
      for (int64_t c = 0; c < C; ++c) {
        double s[16], window[3][3];
        for (int xi = 0; xi < 16; ++xi) {
          s[xi] = 0.0;
          for (int64_t i = 0; i < parts; ++i) s[xi] += sums[i * plane + (xi * p.Cp + c) * p.Kp + k];
        }
        detail::winograd_weight_grad_window(s, window);
        for (int a = 0; a < 3; ++a)
          for (int b = 0; b < 3; ++b) w[k * sk + c * sc + a * sh + b * sw] = static_cast<float>(window[a][b]);
      }
  });
#else
  TORCH_CHECK(false, "conv_winograd: an x86 CPU with AVX2 and FMA only");
#endif
  return out;
}

}  // namespace accelkit::cpu::conv_winograd
