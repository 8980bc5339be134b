// The CPU plugin's operator kernels, registered by the host at LibTorch's CPU dispatch key
// (OperatorKernel). pytorch/examples' MNIST network spends a fifth of its training step in
// LibTorch's NCHW max_pool2d (64x10x24x24: 0.76 ms of 3.5 ms at 2 threads), whose kernel
// branches per element; the 2x2 stride-2 windows of such networks run here branch-free and
// vectorised, with the same values and indices, and their gradient in one pass. Its first
// convolution has one input channel, whose weight gradient LibTorch's oneDNN path computes at a
// fraction of its GEMM rate (2.7 ms a step on an AVX2-only CPU); here as running sums in
// registers, equal to LibTorch's up to the order of the sums.
// Training-mode batch normalisation runs its statistics in one pass and, channels-last, its
// gradient at memory speed (batch_norm_op.hpp); LibTorch's makes three passes for the forward.
// Convolutions with one pixel on their small side (a discriminator's 1x1-output head, a
// generator's first layer from a 1x1 noise input) are matrix products, which oneDNN's
// convolution kernels run at a fraction of a GEMM's rate: here one GEMM each (conv_gemm.hpp).
// Other convolutions go the same way where that is faster for their shape, timed on the shape's
// first calls against LibTorch's kernel (conv_choice.hpp); NCHW ones of 64 or more output pixels
// a few images at a time, in their own layout (conv_planes.hpp): on an AVX-512 Xeon's two cores
// that ran MNIST's two layers at 1.3-1.7x oneDNN's speed, forward and backward. Channels-last
// 3x3 stride-1 layers (a ResNet's body) have a third way, timed beside the two: Winograd's
// F(2x2, 3x3) for the output and both gradients (conv_winograd.hpp).
// Dropout's masks (bernoulli_ with a scalar p) come from a counter-based generator on every
// thread (bernoulli_op.hpp) instead of one Mersenne Twister element by element.
// Every other input - and every call while the host's gate is shut - goes to LibTorch's own
// kernel, called directly (at::cpu:: or at::compositeexplicitautograd::), so the dispatcher
// never finds this one again.
#include "operator_kernels.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/ops/bernoulli_cpu_dispatch.h>
#include <ATen/ops/convolution_backward_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/convolution_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/max_pool2d_with_indices_backward_cpu_dispatch.h>
#include <ATen/ops/max_pool2d_with_indices_cpu_dispatch.h>
#include <ATen/ops/native_batch_norm_backward_cpu_dispatch.h>
#include <ATen/ops/native_batch_norm_cpu_dispatch.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <tuple>

#include "batch_norm_op.hpp"
#include "bernoulli_op.hpp"
#include "conv_choice.hpp"
#include "conv_gemm.hpp"
#include "conv_kernel.hpp"
#include "conv_winograd.hpp"
#include "max_pool_kernel.hpp"

namespace accelkit::cpu {

namespace {

constexpr const char* kMaxPool = "max_pool2d_with_indices";
constexpr const char* kMaxPoolBackward = "max_pool2d_with_indices_backward";
constexpr const char* kConvBackward = "convolution_backward";
constexpr const char* kConv = "convolution";
constexpr const char* kBatchNorm = "native_batch_norm";
constexpr const char* kBatchNormBackward = "native_batch_norm_backward";
constexpr const char* kBernoulli = "bernoulli_.float";

std::atomic<KernelGate> kernel_gate{nullptr};
std::atomic<std::uint64_t> max_pool_calls{0};
std::atomic<std::uint64_t> max_pool_backward_calls{0};
std::atomic<std::uint64_t> conv_backward_calls{0};
std::atomic<std::uint64_t> conv_calls{0};
std::atomic<std::uint64_t> batch_norm_calls{0};
std::atomic<std::uint64_t> batch_norm_backward_calls{0};
std::atomic<std::uint64_t> bernoulli_calls{0};

bool gate_open() {
  const KernelGate gate = kernel_gate.load(std::memory_order_relaxed);
  return gate != nullptr && gate();
}

// A pair (kernel, stride, padding, dilation) as LibTorch reads it: one value for both
// dimensions, or two; `fallback` for the empty stride (= the kernel size).
bool pair_is(at::IntArrayRef v, int64_t want, bool empty_ok) {
  if (v.empty()) return empty_ok;
  if (v.size() == 1) return v[0] == want;
  return v.size() == 2 && v[0] == want && v[1] == want;
}

// The inputs the loop takes: 4-d contiguous NCHW fp32 on the CPU, 2x2 windows at stride 2, no
// padding or dilation, every window inside the plane.
bool fits(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
          at::IntArrayRef dilation, bool ceil_mode) {
  if (self.dim() != 4 || self.scalar_type() != at::kFloat || !self.device().is_cpu() || self.is_quantized())
    return false;
  if (!pair_is(kernel, 2, false) || !pair_is(stride, 2, true) || !pair_is(padding, 0, false) ||
      !pair_is(dilation, 1, false))
    return false;
  const int64_t H = self.size(2), W = self.size(3);
  if (H < 2 || W < 2 || self.numel() == 0) return false;
  if (ceil_mode && (H % 2 != 0 || W % 2 != 0)) return false;  // a last window half outside
  return self.is_contiguous() && self.suggest_memory_format() == at::MemoryFormat::Contiguous;
}

std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(const at::Tensor& self, at::IntArrayRef kernel,
                                                           at::IntArrayRef stride, at::IntArrayRef padding,
                                                           at::IntArrayRef dilation, bool ceil_mode) {
  if (!gate_open() || !fits(self, kernel, stride, padding, dilation, ceil_mode))
    return at::cpu::max_pool2d_with_indices(self, kernel, stride, padding, dilation, ceil_mode);
  const int64_t N = self.size(0), C = self.size(1), H = self.size(2), W = self.size(3);
  const int64_t OH = H / 2, OW = W / 2;
  at::Tensor out = at::empty({N, C, OH, OW}, self.options());
  at::Tensor indices = at::empty({N, C, OH, OW}, self.options().dtype(at::kLong));
  const detail::MaxPool2x2 p{self.data_ptr<float>(), out.data_ptr<float>(), indices.data_ptr<int64_t>(), H, W, OH, OW};
  // At least ~16k windows a chunk: below that a second thread costs more than it saves.
  const int64_t grain = std::max<int64_t>(1, 16384 / OW);
#if defined(__x86_64__) || defined(_M_X64)
  at::parallel_for(0, N * C * OH, grain, [&](int64_t begin, int64_t end) { detail::max_pool_2x2_avx2(p, begin, end); });
#else
  (void)p;
  (void)grain;
#endif
  max_pool_calls.fetch_add(1, std::memory_order_relaxed);
  return {out, indices};
}

// Its gradient, for what max_pool2d_with_indices above took: each window's gradient written to
// the element its index names, zeros around it, in one pass (LibTorch's kernel zero-fills the
// plane, then adds). Indices that do not name an element of their own window (not from such a
// pooling) go to LibTorch's kernel, as does every other input.
at::Tensor max_pool2d_with_indices_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                            at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                                            at::IntArrayRef dilation, bool ceil_mode, const at::Tensor& indices) {
  auto libtorch = [&] {
    return at::cpu::max_pool2d_with_indices_backward(grad_output, self, kernel, stride, padding, dilation, ceil_mode,
                                                     indices);
  };
  if (!gate_open() || !fits(self, kernel, stride, padding, dilation, ceil_mode)) return libtorch();
  const int64_t N = self.size(0), C = self.size(1), H = self.size(2), W = self.size(3);
  const int64_t OH = H / 2, OW = W / 2;
  const int64_t shape[] = {N, C, OH, OW};
  const at::IntArrayRef out_shape(shape);
  if (grad_output.scalar_type() != at::kFloat || !grad_output.is_contiguous() || grad_output.sizes() != out_shape ||
      indices.scalar_type() != at::kLong || !indices.is_contiguous() || indices.sizes() != out_shape ||
      !grad_output.device().is_cpu() || !indices.device().is_cpu())
    return libtorch();
  at::Tensor grad_input = at::empty_like(self, at::MemoryFormat::Contiguous);
  const detail::MaxPool2x2Backward p{grad_output.data_ptr<float>(), indices.data_ptr<int64_t>(),
                                     grad_input.data_ptr<float>(), H, W, OH, OW};
  std::atomic<int64_t> placed{0};
#if defined(__x86_64__) || defined(_M_X64)
  at::parallel_for(0, N * C, std::max<int64_t>(1, 16384 / (H * W)), [&](int64_t begin, int64_t end) {
    placed.fetch_add(detail::max_pool_2x2_backward_avx2(p, begin, end), std::memory_order_relaxed);
  });
#else
  (void)p;
#endif
  if (placed.load() != N * C * OH * OW) return libtorch();
  max_pool_backward_calls.fetch_add(1, std::memory_order_relaxed);
  return grad_input;
}

// FMA, which the convolution loop is built with besides AVX2.
bool cpu_has_fma() {
#if defined(__x86_64__) || defined(_M_X64)
  return __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(_M_X64)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

// The convolution gradient the loop takes: a 2-d convolution of fp32 contiguous NCHW input with
// ONE channel (an image network's first layer), stride 1, no padding or dilation, one group,
// not transposed, rows of at most kConvWeightGradMaxKW weights, and no input gradient wanted
// (the input is the data). LibTorch's kernel computes every other one.
bool conv_fits(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
               at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride, at::IntArrayRef padding,
               at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
               std::array<bool, 3> output_mask) {
  // The loop is built with FMA besides AVX2. With AVX-512, LibTorch's oneDNN kernel is faster
  // (0.25 against 0.56 ms for pytorch/examples' MNIST first layer on an AVX-512 Xeon:
  // accelkit_bench_narrow_conv), so there the loop stays out.
  static const bool fma = cpu_has_fma() && !cpu_has_avx512();
  if (!fma || output_mask[0] || !output_mask[1] || transposed || groups != 1) return false;
  if (output_mask[2] && (!bias_sizes.has_value() || bias_sizes->size() != 1 || (*bias_sizes)[0] != weight.size(0)))
    return false;
  if (input.dim() != 4 || weight.dim() != 4 || grad_output.dim() != 4) return false;
  for (const at::Tensor* t : {&grad_output, &input, &weight})
    if (t->scalar_type() != at::kFloat || !t->device().is_cpu() || t->is_quantized() || !t->is_contiguous() ||
        t->suggest_memory_format() != at::MemoryFormat::Contiguous)
      return false;
  // One value for both dimensions or two (at::conv2d passes its defaults as one).
  if (!pair_is(stride, 1, false) || !pair_is(padding, 0, false) || !pair_is(dilation, 1, false) ||
      !pair_is(output_padding, 0, true))
    return false;
  const int64_t N = input.size(0), H = input.size(2), W = input.size(3);
  const int64_t OC = weight.size(0), KH = weight.size(2), KW = weight.size(3);
  if (input.size(1) != 1 || weight.size(1) != 1 || KW < 1 || KW > detail::kConvWeightGradMaxKW || KH < 1 ||
      KH > H || KW > W || N < 1 || OC < 1)
    return false;
  const int64_t shape[] = {N, OC, H - KH + 1, W - KW + 1};
  return grad_output.sizes() == at::IntArrayRef(shape);
}

// The per-shape choice between LibTorch's kernel and the GEMM path for the convolutions that
// have more than one pixel on their small side (conv_choice.hpp).
conv_choice::Table& choices() {
  static conv_choice::Table table;
  return table;
}

void add_list(conv_choice::Key& key, at::IntArrayRef v) {
  key.push_back(static_cast<int64_t>(v.size()));
  key.insert(key.end(), v.begin(), v.end());
}

void add_tensor(conv_choice::Key& key, const at::Tensor& t) {
  if (!t.defined()) return key.push_back(-1);
  add_list(key, t.sizes());
  add_list(key, t.strides());
}

// Everything that can change either path's time: which operator and gradients, the tensors'
// sizes and strides, the arguments, the thread count.
conv_choice::Key shape_key(int64_t op, const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                           const conv_gemm::ConvArgs& a, std::array<bool, 3> mask, bool bias) {
  conv_choice::Key key{op, mask[0], mask[1], mask[2], bias, a.transposed, at::get_num_threads(),
                       static_cast<int64_t>(input.scalar_type())};
  add_tensor(key, grad_output);
  add_tensor(key, input);
  add_tensor(key, weight);
  for (const at::IntArrayRef v : {a.stride, a.padding, a.dilation, a.output_padding}) add_list(key, v);
  return key;
}

// This call by the path the shape's choice gives among LibTorch's kernel and `others`: a trial
// is timed and recorded.
template <class LibTorch, class Gemm, class Winograd>
auto chosen(const conv_choice::Key& key, conv_choice::Paths others, LibTorch&& libtorch, Gemm&& gemm,
            Winograd&& winograd) {
  const conv_choice::Turn turn = choices().next(key, others);
  auto run = [&] {
    if (turn.path == conv_choice::Path::gemm) return gemm();
    if (turn.path == conv_choice::Path::winograd) return winograd();
    return libtorch();
  };
  if (!turn.trial) return run();
  const auto t0 = std::chrono::steady_clock::now();
  auto result = run();
  choices().record(key, turn.path,
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return result;
}

// LibTorch's oneDNN writes past its buffers computing the weight gradient of a channels-last 1x1
// convolution with a stride above 1 and few input channels: the 2.13 wheel and Debian's 1.13, on
// an AVX-512 Xeon, corrupt the heap for 2, 4, 5, 6, 8, 12 or 15 input channels over 12x12 pixels
// at stride 2 ("corrupted size vs. prev_size", "free(): invalid pointer") - not for 16 to 48,
// nor with an NCHW input. Step tuning makes a program's activations channels-last where that is
// faster, so the GEMM path computes every such gradient with under 16 input channels, whatever
// the shape's timing says. (Above that LibTorch's kernel stays: on 1.13 it ran a ResNet's 16- and
// 32-channel shortcuts 3-4x as fast as the GEMM path.)
bool libtorch_strided_1x1_hazard(const at::Tensor& input, const conv_gemm::Geometry& g, std::array<bool, 3> mask) {
  return mask[1] && !g.transposed && g.KH == 1 && g.KW == 1 && (g.stride[0] > 1 || g.stride[1] > 1) && g.C < 16 &&
         input.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
}

// Whether the Winograd path (conv_winograd.hpp) is timed for this convolution: what it takes,
// with a channels-last input (whose output and input gradient LibTorch's kernel makes
// channels-last too, as that path does).
bool winograd_fits(const at::Tensor& input, const at::Tensor& weight, const conv_gemm::ConvArgs& a) {
  return input.dim() == 4 && input.suggest_memory_format() == at::MemoryFormat::ChannelsLast &&
         input.is_contiguous(at::MemoryFormat::ChannelsLast) &&
         conv_winograd::eligible(input, weight, a.stride, a.padding, a.dilation, a.transposed, a.groups);
}

// The output sizes of a convolution the Winograd path takes: 3x3 windows at stride 1.
std::array<int64_t, 4> winograd_output_sizes(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef padding) {
  int64_t pad[2] = {0, 0};
  (void)conv_gemm::read_pair(padding, 0, pad);  // winograd_fits() took it
  return {input.size(0), weight.size(0), input.size(2) + 2 * pad[0] - 2, input.size(3) + 2 * pad[1] - 2};
}

// The paths timed beside LibTorch's kernel: the GEMM path and the Winograd path, where each fits.
conv_choice::Paths others_than_libtorch(bool gemm, bool winograd) {
  using conv_choice::bit;
  using conv_choice::Path;
  return static_cast<conv_choice::Paths>((gemm ? bit(Path::gemm) : 0) | (winograd ? bit(Path::winograd) : 0));
}

// The GEMM path (conv_gemm.hpp) for a convolution's gradients: always for one pixel on the
// small side and for LibTorch's hazard above, by the shape's timed choice for the rest it
// fits; LibTorch's kernel for every other input (grad_output not of the output's shape, a bias
// not of its channels).
std::tuple<at::Tensor, at::Tensor, at::Tensor> gemm_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::OptionalIntArrayRef bias_sizes,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  const conv_gemm::ConvArgs args{stride, padding, dilation, output_padding, transposed, groups};
  const auto g = conv_gemm::fit_any(input, weight, args);
  auto libtorch_for = [&](std::array<bool, 3> mask) {
    return at::compositeexplicitautograd::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
                                                               dilation, transposed, output_padding, groups, mask);
  };
  auto libtorch = [&] { return libtorch_for(output_mask); };
  // A bf16 convolution's (autocast's) weight gradient by one bf16 GEMM with fp32 sums, its input
  // and bias gradients by LibTorch's kernel, timed per shape against LibTorch's kernel for all
  // three. On a Zen 4 EPYC (AVX512_BF16, 2 threads) oneDNN ran the bf16 weight gradient of
  // pytorch/examples' DCGAN discriminator's 4x4 stride-2 layers at a third to a half of its
  // forward's rate; the GEMM alone took 1.5 ms of its 3.7-4.0 for the 128 -> 256 layer.
  if (output_mask[1] && input.scalar_type() == at::kBFloat16) {
    const auto gb = conv_gemm::fit_bf16_weight_grad(grad_output, input, weight, args);
    if (!gb) return libtorch();
    auto split = [&] {
      conv_backward_calls.fetch_add(1, std::memory_order_relaxed);
      at::Tensor grad_input, grad_bias;
      if (output_mask[0] || output_mask[2])
        std::tie(grad_input, std::ignore, grad_bias) = libtorch_for({output_mask[0], false, output_mask[2]});
      return std::make_tuple(grad_input, conv_gemm::weight_grad(grad_output, input, weight, *gb), grad_bias);
    };
    return chosen(shape_key(1, grad_output, input, weight, args, output_mask, output_mask[2]),
                  conv_choice::bit(conv_choice::Path::gemm), libtorch, split, libtorch);
  }
  const bool grad_fits = grad_output.scalar_type() == at::kFloat && grad_output.device().is_cpu() &&
                         grad_output.layout() == at::kStrided;
  auto bias_fits = [&](int64_t channels) {
    return !output_mask[2] || (bias_sizes.has_value() && bias_sizes->size() == 1 && (*bias_sizes)[0] == channels);
  };
  const bool fit = g.has_value() && grad_fits && grad_output.sizes() == at::IntArrayRef(g->output_shape()) &&
                   bias_fits(g->out_channels);
  // The Winograd path for the input and weight gradients of what it takes (its own fit: it
  // takes shapes the GEMM path leaves, ResNet-20's 16-channel layers over 32x32 at batch 128
  // among them).
  const bool wino = (output_mask[0] || output_mask[1]) && grad_fits && winograd_fits(input, weight, args) &&
                    grad_output.sizes() == at::IntArrayRef(winograd_output_sizes(input, weight, padding)) &&
                    bias_fits(weight.size(0));
  if (!fit && !wino) return libtorch();
  auto gemm = [&] {
    conv_backward_calls.fetch_add(1, std::memory_order_relaxed);
    return conv_gemm::backward(grad_output, input, weight, *g, output_mask);
  };
  if (fit && (conv_gemm::one_pixel(*g) || libtorch_strided_1x1_hazard(input, *g, output_mask))) return gemm();
  // The Winograd path computes the input and weight gradients; the bias's is grad_output's sum
  // over the batch and the pixels, as LibTorch's.
  auto winograd = [&] {
    conv_backward_calls.fetch_add(1, std::memory_order_relaxed);
    at::Tensor grad_input, grad_weight, grad_bias;
    if (output_mask[0]) grad_input = conv_winograd::input_grad(grad_output, weight, input.sizes(), padding);
    if (output_mask[1]) grad_weight = conv_winograd::weight_grad(grad_output, input, weight, padding);
    if (output_mask[2]) grad_bias = grad_output.sum({0, 2, 3});
    return std::make_tuple(grad_input, grad_weight, grad_bias);
  };
  return chosen(shape_key(1, grad_output, input, weight, args, output_mask, output_mask[2]),
                others_than_libtorch(fit, wino), libtorch, gemm, winograd);
}

// aten::convolution: the GEMM path for one-pixel convolutions, by each shape's timed choice for
// the others it fits, LibTorch's kernel for the rest.
at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
  auto libtorch = [&] {
    return at::compositeexplicitautograd::convolution(input, weight, bias, stride, padding, dilation, transposed,
                                                      output_padding, groups);
  };
  if (!gate_open()) return libtorch();
  const conv_gemm::ConvArgs args{stride, padding, dilation, output_padding, transposed, groups};
  const auto g = conv_gemm::fit_any(input, weight, args);
  const bool with_bias = bias.has_value() && bias->defined();
  auto bias_fits = [&](int64_t channels) {
    return !with_bias || (bias->dim() == 1 && bias->scalar_type() == at::kFloat && bias->device().is_cpu() &&
                          bias->size(0) == channels);
  };
  const bool fit = g.has_value() && bias_fits(g->out_channels);
  const bool wino = winograd_fits(input, weight, args) && bias_fits(weight.size(0));
  if (!fit && !wino) return libtorch();
  auto gemm = [&] {
    conv_calls.fetch_add(1, std::memory_order_relaxed);
    return conv_gemm::forward(input, weight, bias, *g);
  };
  if (fit && conv_gemm::one_pixel(*g)) return gemm();
  auto winograd = [&] {
    conv_calls.fetch_add(1, std::memory_order_relaxed);
    return conv_winograd::forward(input, weight, bias, padding);
  };
  return chosen(shape_key(0, at::Tensor(), input, weight, args, {false, false, false}, with_bias),
                others_than_libtorch(fit, wino), libtorch, gemm, winograd);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::OptionalIntArrayRef bias_sizes,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  if (!gate_open())
    return at::compositeexplicitautograd::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
                                                               dilation, transposed, output_padding, groups,
                                                               output_mask);
  if (!conv_fits(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
                 output_mask))
    return gemm_convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                                     output_padding, groups, output_mask);
  const int64_t N = input.size(0), H = input.size(2), W = input.size(3);
  const int64_t OC = weight.size(0), KH = weight.size(2), KW = weight.size(3);
  at::Tensor grad_weight = at::empty_like(weight, at::MemoryFormat::Contiguous);
  at::Tensor grad_bias = output_mask[2] ? at::empty({OC}, weight.options()) : at::Tensor();
  const detail::ConvWeightGrad1 p{input.data_ptr<float>(),
                                  grad_output.data_ptr<float>(),
                                  grad_weight.data_ptr<float>(),
                                  output_mask[2] ? grad_bias.data_ptr<float>() : nullptr,
                                  N,
                                  OC,
                                  H,
                                  W,
                                  KH,
                                  KW,
                                  H - KH + 1,
                                  W - KW + 1};
#if defined(__x86_64__) || defined(_M_X64)
  // One weight row a task: each reads all of grad_output's plane for its filter, so a task is
  // long enough for any thread count worth having.
  at::parallel_for(0, OC * KH, 1, [&](int64_t begin, int64_t end) { detail::conv_weight_grad_c1_avx2(p, begin, end); });
#else
  (void)p;
#endif
  conv_backward_calls.fetch_add(1, std::memory_order_relaxed);
  return {at::Tensor(), grad_weight, grad_bias};
}

// aten::native_batch_norm: training-mode fp32 by the plugin (batch_norm_op.hpp), LibTorch's for
// the rest.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(const at::Tensor& input,
                                                                const c10::optional<at::Tensor>& weight,
                                                                const c10::optional<at::Tensor>& bias,
                                                                const c10::optional<at::Tensor>& running_mean,
                                                                const c10::optional<at::Tensor>& running_var,
                                                                bool training, double momentum, double eps) {
  if (training && gate_open()) {
    if (auto r = batch_norm::forward(input, weight, bias, running_mean, running_var, momentum, eps)) {
      batch_norm_calls.fetch_add(1, std::memory_order_relaxed);
      return *r;
    }
  }
  return at::cpu::native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const c10::optional<at::Tensor>& weight,
    const c10::optional<at::Tensor>& running_mean, const c10::optional<at::Tensor>& running_var,
    const c10::optional<at::Tensor>& save_mean, const c10::optional<at::Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask) {
  if (train && gate_open()) {
    if (auto r = batch_norm::backward(grad_out, input, weight, save_mean, save_invstd, output_mask)) {
      batch_norm_backward_calls.fetch_add(1, std::memory_order_relaxed);
      return *r;
    }
  }
  return at::cpu::native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
                                             save_invstd, train, eps, output_mask);
}

// aten::bernoulli_.float: floating-point, integer and boolean tensors by the plugin (bernoulli_op.hpp),
// LibTorch's for the rest.
at::Tensor& bernoulli_float(at::Tensor& self, double p, c10::optional<at::Generator> generator) {
  static const bool avx512 = cpu_has_avx512();
  if (gate_open() && bernoulli::fill(self, p, generator, avx512)) {
    bernoulli_calls.fetch_add(1, std::memory_order_relaxed);
    return self;
  }
  return at::cpu::bernoulli_(self, p, generator);
}

}  // namespace

std::vector<OperatorKernel> operator_kernels(const IsaFlags& isa) {
  std::vector<OperatorKernel> ks;
#if !defined(__x86_64__) && !defined(_M_X64)
  (void)isa;
  return ks;  // the loop is built for x86-64 only
#endif
  if (isa.avx2) {
    ks.push_back({kMaxPool, "2x2 windows at stride 2 over fp32 NCHW, branch-free AVX2; LibTorch's kernel for the rest",
                  [](torch::Library& library, KernelGate gate) {
                    kernel_gate.store(gate, std::memory_order_relaxed);
                    library.impl(kMaxPool, TORCH_FN(max_pool2d_with_indices));
                  }});
    ks.push_back({kMaxPoolBackward,
                  "its gradient in one pass, no zero-fill first (AVX2); LibTorch's kernel for the rest",
                  [](torch::Library& library, KernelGate gate) {
                    kernel_gate.store(gate, std::memory_order_relaxed);
                    library.impl(kMaxPoolBackward, TORCH_FN(max_pool2d_with_indices_backward));
                  }});
    ks.push_back({kConv,
                  "fp32 convolutions of one group as GEMMs over their patches (NCHW ones of 64 or more output "
                  "pixels image by image, the rest as one GEMM), and channels-last 3x3 stride-1 ones by Winograd's "
                  "F(2x2, 3x3) (AVX2 and FMA): always the GEMM where they have one pixel on the small side (1x1 "
                  "output, or 1x1 input of a transposed one), by each shape's timing against LibTorch's kernel on its "
                  "first calls for the others; LibTorch's kernel for the rest",
                  [](torch::Library& library, KernelGate gate) {
                    kernel_gate.store(gate, std::memory_order_relaxed);
                    library.impl(kConv, TORCH_FN(convolution));
                  }});
    ks.push_back({kConvBackward,
                  "their gradients the same way (Winograd's for the input gradient); the weight gradient of a one-channel NCHW convolution (stride 1, "
                  "no padding, rows of at most 7 weights) as running sums in registers where the CPU has FMA; "
                  "a bf16 one's weight gradient as one bf16 GEMM where the shape's timing says so; "
                  "LibTorch's kernel for the rest",
                  [](torch::Library& library, KernelGate gate) {
                    kernel_gate.store(gate, std::memory_order_relaxed);
                    library.impl(kConvBackward, TORCH_FN(convolution_backward));
                  }});
    ks.push_back({kBatchNorm,
                  "training-mode batch normalisation over fp32 (channels-last, [N, C] or NCHW): the statistics in "
                  "one pass, the normalisation in one more; LibTorch's kernel for the rest",
                  [](torch::Library& library, KernelGate gate) {
                    kernel_gate.store(gate, std::memory_order_relaxed);
                    library.impl(kBatchNorm, TORCH_FN(native_batch_norm));
                  }});
    ks.push_back({kBatchNormBackward,
                  "its gradient for channels-last and [N, C] in two passes; LibTorch's kernel for the rest",
                  [](torch::Library& library, KernelGate gate) {
                    kernel_gate.store(gate, std::memory_order_relaxed);
                    library.impl(kBatchNormBackward, TORCH_FN(native_batch_norm_backward));
                  }});
    ks.push_back({kBernoulli,
                  "dropout's masks: draws of Bernoulli(p) into floating-point, integer or boolean tensors from "
                  "Philox4x32-10 on every thread (AVX2, or AVX-512), keyed by one draw from the generator; LibTorch's kernel "
                  "for the rest",
                  [](torch::Library& library, KernelGate gate) {
                    kernel_gate.store(gate, std::memory_order_relaxed);
                    library.impl(kBernoulli, TORCH_FN(bernoulli_float));
                  }});
  }
  return ks;
}

Result<std::vector<std::string>> plan_operator_kernels(Toggle request, const IsaFlags& isa, std::string& reason) {
  std::vector<std::string> ops;
  for (const auto& k : operator_kernels(isa)) ops.push_back(k.op);
  if (request == Toggle::off) {
    reason = "kernels: LibTorch's own (kernels = off)";
    return std::vector<std::string>{};
  }
  if (ops.empty()) {
    if (request == Toggle::on)
      return Status(StatusCode::not_supported,
                    "kernels = on, but this CPU has none of the plugin's kernels (they need AVX2)");
    reason = "kernels: LibTorch's own (the plugin's need AVX2)";
    return ops;
  }
  reason = "kernels: max_pool2d_with_indices and its backward by the plugin for 2x2 stride-2 fp32 NCHW "
           "windows (AVX2, branch-free; LibTorch's NCHW kernel branches per element)";
  reason += "; convolution and convolution_backward for fp32 convolutions with one pixel on the small side (1x1 "
            "output, or 1x1 input of a transposed one) as one GEMM (oneDNN runs them at a fraction of its GEMM "
            "rate), and for other fp32 convolutions of one group where that GEMM beat LibTorch's kernel on the "
            "shape's first calls (each shape timed both ways)";
  if (cpu_has_fma())
    reason += ", or Winograd's F(2x2, 3x3) for channels-last 3x3 stride-1 ones (their output and input gradient) "
              "where that beat both (timed the same way; 2.25x fewer multiplies)";
  if (cpu_has_fma() && !cpu_has_avx512())
    reason += ", and convolution_backward for the weight gradient of one-input-channel fp32 convolutions (LibTorch's "
              "runs them at a fraction of its GEMM rate)";
  reason += "; native_batch_norm and its backward for training-mode fp32 batch normalisation (LibTorch's makes "
            "three passes over the input for its statistics and output)";
  reason += "; bernoulli_ with a scalar p (dropout's masks) from a counter-based generator on every thread "
            "(LibTorch's draws one element at a time from one generator)";
  reason += "; LibTorch's for every other input";
  return ops;
}

std::uint64_t operator_kernel_calls(const std::string& op) noexcept {
  if (op == kMaxPool) return max_pool_calls.load(std::memory_order_relaxed);
  if (op == kMaxPoolBackward) return max_pool_backward_calls.load(std::memory_order_relaxed);
  if (op == kConvBackward) return conv_backward_calls.load(std::memory_order_relaxed);
  if (op == kConv) return conv_calls.load(std::memory_order_relaxed);
  if (op == kBatchNorm) return batch_norm_calls.load(std::memory_order_relaxed);
  if (op == kBatchNormBackward) return batch_norm_backward_calls.load(std::memory_order_relaxed);
  if (op == kBernoulli) return bernoulli_calls.load(std::memory_order_relaxed);
  return 0;
}

conv_choice::Table::Counts convolution_shapes() noexcept {
  try {
    return choices().counts();
  } catch (...) {
    return {};
  }
}

}  // namespace accelkit::cpu
