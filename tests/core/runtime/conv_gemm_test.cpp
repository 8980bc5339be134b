// The CPU plugin's GEMM path for convolutions with one pixel on their small side (a 1x1
// output, or a transposed one's 1x1 input: plugins/cpu/conv_gemm.hpp) through a
// Runtime on the built CPU plugin, against LibTorch's own kernel (straight to it, as the
// dispatcher would call it with the plugin gone) and fp64, on fresh random inputs: forward and
// backward, plain and transposed, strides, padding, dilation, output padding, bias or none,
// NCHW and channels-last - values, shapes and layouts. Other convolutions take the GEMM path or
// LibTorch's kernel by each shape's timed choice (plugins/cpu/conv_choice.hpp): the path itself
// is checked here called directly on random convolutions of any shape, the choice's rules on
// given times, and the choice through the dispatcher on a fresh shape. Other dtypes, groups,
// arguments LibTorch refuses and a shut gate stay LibTorch's (its result, its error).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/ops/convolution_backward_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/convolution_compositeexplicitautograd_dispatch.h>

#include "torch_doctest.hpp"

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "accelkit/runtime.hpp"
#include "accelkit/sdk/device.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "conv_choice.hpp"
#include "conv_gemm.hpp"
#include "conv_planes.hpp"
#include "conv_winograd.hpp"
#include "cpu_runtime.hpp"
#include "test_support.hpp"

namespace conv_gemm_suite {

using namespace accelkit;
using accelkit::test::test_seed;

namespace {

constexpr const char* kForward = "convolution";
constexpr const char* kBackward = "convolution_backward";


struct Conv {
  std::vector<int64_t> input, weight, stride, padding, dilation, output_padding;
  bool transposed = false;
  bool bias = false;
  bool channels_last = false;
  std::string label() const {
    std::string s = std::string(transposed ? "transposed " : "") + "input " + std::to_string(input[0]);
    for (size_t i = 1; i < 4; ++i) s += "x" + std::to_string(input[i]);
    s += " weight " + std::to_string(weight[0]);
    for (size_t i = 1; i < 4; ++i) s += "x" + std::to_string(weight[i]);
    s += " stride " + std::to_string(stride[0]) + "," + std::to_string(stride[1]) + " padding " +
         std::to_string(padding[0]) + "," + std::to_string(padding[1]) + " dilation " + std::to_string(dilation[0]) +
         "," + std::to_string(dilation[1]);
    if (transposed) s += " output_padding " + std::to_string(output_padding[0]) + "," + std::to_string(output_padding[1]);
    return s + (bias ? " bias" : "") + (channels_last ? " channels-last" : "");
  }
};

at::Tensor layout(const at::Tensor& t, bool channels_last) {
  return channels_last ? t.contiguous(at::MemoryFormat::ChannelsLast) : t.contiguous();
}

// LibTorch's own kernel, the reference here, writes past its buffers computing the weight
// gradient of a channels-last 1x1 convolution with a stride above 1 and under 16 input channels
// (operator_kernels.cpp in the CPU plugin, which takes those on its GEMM path: the last case
// below): random convolutions of that kind (any channel count) are drawn NCHW. So are transposed
// ones of that kind: on a Zen 4 EPYC (AVX-512) the 2.13 wheel's kernel refused one ("could not
// construct a memory descriptor using a format tag": input 5x12x7x4 channels-last, weight
// 12x4x1x1, stride 2,1, output padding 1,0) and corrupted the heap on another of the same draw.
void avoid_libtorch_hazard(Conv& c) {
  if (c.weight[2] == 1 && c.weight[3] == 1 && (c.stride[0] > 1 || c.stride[1] > 1)) c.channels_last = false;
}

// The convolution through the dispatcher (the plugin's kernel while the gate is open), or
// straight to LibTorch's kernel, below autograd as the dispatcher calls it.
at::Tensor forward(const Conv& c, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, bool libtorch) {
  const c10::optional<at::Tensor> bias = c.bias ? c10::optional<at::Tensor>(b) : c10::nullopt;
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  if (libtorch)
    return at::compositeexplicitautograd::convolution(x, w, bias, c.stride, c.padding, c.dilation, c.transposed,
                                                      c.output_padding, 1);
  return at::convolution(x, w, bias, c.stride, c.padding, c.dilation, c.transposed, c.output_padding, 1);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const Conv& c, const at::Tensor& g, const at::Tensor& x,
                                                        const at::Tensor& w, std::array<bool, 3> mask, bool libtorch) {
  const std::vector<int64_t> bias_sizes{w.size(c.transposed ? 1 : 0)};
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  if (libtorch)
    return at::compositeexplicitautograd::convolution_backward(g, x, w, bias_sizes, c.stride, c.padding, c.dilation,
                                                               c.transposed, c.output_padding, 1, mask);
  return at::convolution_backward(g, x, w, bias_sizes, c.stride, c.padding, c.dilation, c.transposed,
                                  c.output_padding, 1, mask);
}

// The largest error against fp64, relative to the largest fp64 value.
double error(const at::Tensor& got, const at::Tensor& want, const at::Tensor& magnitude) {
  const double scale = magnitude.abs().max().item<double>();
  return (got.to(at::kDouble) - want).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
}
double error(const at::Tensor& got, const at::Tensor& want) { return error(got, want, want); }

// Same shape and dtype as LibTorch's, the same layout, and as close to fp64 as LibTorch's (or
// within fp32's rounding of sums of a few hundred products). The error is relative to the sums'
// magnitude - the same sums of |terms| (`magnitude`) - not to their results, which cancel: a
// one-pixel output of one image is a single sum.
// `slack`: what the result's own rounding adds (fp32's: next to none; bf16's: half a unit in
// the last of its 8 bits, 2^-9 of the largest value, for any result).
void check_close(const at::Tensor& got, const at::Tensor& lib, const at::Tensor& ref, const at::Tensor& magnitude,
                 const std::string& what, double slack = 2e-6) {
  CAPTURE(what);
  REQUIRE(got.defined() == lib.defined());
  if (!got.defined()) return;
  REQUIRE(got.sizes() == lib.sizes());
  CHECK((got.scalar_type() == lib.scalar_type()));
  CHECK(got.is_contiguous() == lib.is_contiguous());
  CHECK(got.is_contiguous(at::MemoryFormat::ChannelsLast) == lib.is_contiguous(at::MemoryFormat::ChannelsLast));
  const double e = error(got, ref, magnitude), e_lib = error(lib, ref, magnitude);
  CAPTURE(e);
  CAPTURE(e_lib);
  CHECK(e <= 4 * e_lib + slack);
}

// A convolution's gradients `got` against LibTorch's kernel and fp64, for what `mask` asks (what
// it leaves out is not read: LibTorch's kernel computes some of it anyway).
void check_grads(const Conv& c, const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, std::array<bool, 3> mask,
                 const std::tuple<at::Tensor, at::Tensor, at::Tensor>& got, double slack = 2e-6) {
  auto fp64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
  auto fp64_abs = [](const at::Tensor& t) { return t.to(at::kDouble).abs(); };
  const auto lib = backward(c, g, x, w, mask, true);
  const auto ref = backward(c, fp64(g), fp64(x), fp64(w), mask, true);
  const auto magnitudes = backward(c, fp64_abs(g), fp64_abs(x), fp64_abs(w), mask, true);
  if (mask[0])
    check_close(std::get<0>(got), std::get<0>(lib), std::get<0>(ref), std::get<0>(magnitudes), "grad_input", slack);
  if (mask[1])
    check_close(std::get<1>(got), std::get<1>(lib), std::get<1>(ref), std::get<1>(magnitudes), "grad_weight", slack);
  if (mask[2])
    check_close(std::get<2>(got), std::get<2>(lib), std::get<2>(ref), std::get<2>(magnitudes), "grad_bias", slack);
}

// A random convolution with one pixel on the small side (1x1 output of a plain one, 1x1 input
// of a transposed one), sometimes with one input or output channel too.
Conv random_one_pixel(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Conv c;
  c.transposed = pick(0, 1) == 1;
  c.bias = pick(0, 1) == 1;
  c.channels_last = pick(0, 1) == 1;
  const int kind = pick(0, 3);  // 0: one input channel, 1: one output channel, else neither
  int64_t cin = pick(1, 24), cout = pick(1, 24);
  if (kind == 0) cin = 1;
  if (kind == 1) cout = 1;
  const int64_t kh = pick(1, 5), kw = pick(1, 5);
  c.stride = {pick(1, 3), pick(1, 3)};
  c.dilation = {pick(1, 2), pick(1, 2)};
  const int64_t n = pick(1, 9);
  // Padding of at most half the dilated kernel, so that every window reaches the image: LibTorch
  // 2.13's oneDNN kernel, the reference here, crashes on some windows wholly in the padding
  // (8x7x19x1 channels-last, weight 1x7x2x1, stride 2,3, padding 0,2, dilation 2,2).
  c.padding = {std::min<int64_t>(pick(0, 2), (c.dilation[0] * (kh - 1)) / 2),
               std::min<int64_t>(pick(0, 2), (c.dilation[1] * (kw - 1)) / 2)};
  if (!c.transposed) {
    c.output_padding = {0, 0};
    // The window covers the padded image (and up to stride - 1 more): one output pixel.
    int64_t h = c.dilation[0] * (kh - 1) + 1 - 2 * c.padding[0] + pick(0, static_cast<int>(c.stride[0]) - 1);
    int64_t w = c.dilation[1] * (kw - 1) + 1 - 2 * c.padding[1] + pick(0, static_cast<int>(c.stride[1]) - 1);
    if (h < 1 || w < 1) c.padding = {0, 0}, h = c.dilation[0] * (kh - 1) + 1, w = c.dilation[1] * (kw - 1) + 1;
    c.input = {n, cin, h, w};
    c.weight = {cout, cin, kh, kw};
  } else {
    const int64_t h = 1, w = 1;
    c.output_padding = {pick(0, static_cast<int>(c.stride[0]) - 1), pick(0, static_cast<int>(c.stride[1]) - 1)};
    c.input = {n, cin, h, w};
    c.weight = {cin, cout, kh, kw};
  }
  avoid_libtorch_hazard(c);
  return c;
}

// A random convolution of any shape the GEMM path takes: many pixels, one or many channels,
// strides, padding, dilation, output padding.
Conv random_conv(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Conv c;
  c.transposed = pick(0, 1) == 1;
  c.bias = pick(0, 1) == 1;
  c.channels_last = pick(0, 1) == 1;
  const int64_t cin = pick(1, 20), cout = pick(1, 20), kh = pick(1, 5), kw = pick(1, 5), n = pick(1, 5);
  c.stride = {pick(1, 3), pick(1, 3)};
  c.dilation = {pick(1, 2), pick(1, 2)};
  // As in random_one_pixel: every window reaches the image (LibTorch 2.13's oneDNN crash).
  c.padding = {std::min<int64_t>(pick(0, 2), (c.dilation[0] * (kh - 1)) / 2),
               std::min<int64_t>(pick(0, 2), (c.dilation[1] * (kw - 1)) / 2)};
  if (!c.transposed) {
    c.output_padding = {0, 0};
    c.input = {n, cin, c.dilation[0] * (kh - 1) + 1 + pick(0, 12), c.dilation[1] * (kw - 1) + 1 + pick(0, 12)};
    c.weight = {cout, cin, kh, kw};
  } else {
    c.output_padding = {pick(0, static_cast<int>(c.stride[0]) - 1), pick(0, static_cast<int>(c.stride[1]) - 1)};
    c.input = {n, cin, pick(1, 9), pick(1, 9)};
    c.weight = {cin, cout, kh, kw};
  }
  avoid_libtorch_hazard(c);
  return c;
}

}  // namespace

TEST_CASE("one-pixel convolutions: the GEMM path against LibTorch's kernel and fp64, forward and backward") {
  auto rt = test::start_cpu_runtime();
  const test::Fp32Thread fp32;
  if (!test::plan_lists_kernel(*rt, kForward)) {
    MESSAGE("skipped: the plan lists no plugin convolution (a CPU without AVX2, said by operator_kernels_test)");
    return;
  }
  std::mt19937 rng(test_seed());
  at::manual_seed(test_seed());
  std::uint64_t forward_calls = test::required_kernel_calls(*rt, kForward), backward_calls = test::required_kernel_calls(*rt, kBackward);
  for (int i = 0; i < 160; ++i) {
    const Conv c = random_one_pixel(rng);
    INFO(c.label());
    const at::Tensor x = layout(at::randn(c.input), c.channels_last);
    const at::Tensor w = layout(at::randn(c.weight), c.channels_last && i % 3 != 0);
    const at::Tensor b = at::randn({c.weight[c.transposed ? 1 : 0]});
    const at::Tensor lib = forward(c, x, w, b, true);
    const at::Tensor got = forward(c, x, w, b, false);
    CHECK(test::required_kernel_calls(*rt, kForward) == ++forward_calls);
    auto fp64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
    auto fp64_abs = [](const at::Tensor& t) { return t.to(at::kDouble).abs(); };
    const at::Tensor ref = forward(c, fp64(x), fp64(w), fp64(b), true);
    check_close(got, lib, ref, forward(c, fp64_abs(x), fp64_abs(w), fp64_abs(b), true), "output");

    const at::Tensor g = layout(at::randn(lib.sizes()), i % 2 == 0);
    const std::array<bool, 3> mask{i % 4 != 1, i % 4 != 2, c.bias};
    CAPTURE(mask[0]);
    CAPTURE(mask[1]);
    const auto got_grads = backward(c, g, x, w, mask, false);
    // The first layer's weight gradient may take the register loop instead: counted the same.
    CHECK(test::required_kernel_calls(*rt, kBackward) == ++backward_calls);
    check_grads(c, g, x, w, mask, got_grads);
  }
}

TEST_CASE("one-pixel convolutions: other dtypes, groups and a shut gate stay LibTorch's") {
  auto rt = test::start_cpu_runtime();
  const test::Fp32Thread fp32;
  if (!test::plan_lists_kernel(*rt, kForward)) return;  // said in the first case
  at::manual_seed(test_seed());
  const std::uint64_t forward_calls = test::required_kernel_calls(*rt, kForward), backward_calls = test::required_kernel_calls(*rt, kBackward);
  auto same = [](const at::Tensor& a, const at::Tensor& b) {
    REQUIRE(a.sizes() == b.sizes());
    CHECK(at::equal(a, b));
  };
  Conv narrow{{4, 7, 3, 3}, {5, 7, 3, 3}, {1, 1}, {0, 0}, {1, 1}, {0, 0}, false, false, false};  // 1x1 out
  {
    INFO("fp64 and two groups");
    const at::Tensor x = at::randn(narrow.input, at::kDouble), w = at::randn(narrow.weight, at::kDouble);
    same(forward(narrow, x, w, at::Tensor(), false), forward(narrow, x, w, at::Tensor(), true));
    const at::Tensor x2 = at::randn({4, 2, 3, 3}), w2 = at::randn({2, 1, 3, 3});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    same(at::convolution(x2, w2, c10::nullopt, {1, 1}, {0, 0}, {1, 1}, false, {0, 0}, 2),
         at::compositeexplicitautograd::convolution(x2, w2, c10::nullopt, {1, 1}, {0, 0}, {1, 1}, false, {0, 0}, 2));
  }
  CHECK(test::required_kernel_calls(*rt, kForward) == forward_calls);
  CHECK(test::required_kernel_calls(*rt, kBackward) == backward_calls);
  {
    INFO("arguments LibTorch refuses get its error: the weight's channels are not the input's");
    const at::Tensor x = at::randn({2, 1, 3, 3}), w = at::randn({4, 2, 3, 3});
    CHECK_THROWS(forward(narrow, x, w, at::Tensor(), false));
    CHECK(test::required_kernel_calls(*rt, kForward) == forward_calls);
  }
  // A plain plan on this thread shuts the gate: LibTorch's kernel.
  const at::Tensor x = at::randn(narrow.input), w = at::randn(narrow.weight);
  rt->apply_precision(PrecisionPlan{});
  same(forward(narrow, x, w, at::Tensor(), false), forward(narrow, x, w, at::Tensor(), true));
  CHECK(test::required_kernel_calls(*rt, kForward) == forward_calls);
  rt->apply_precision(rt->precision());
  (void)forward(narrow, x, w, at::Tensor(), false);
  CHECK(test::required_kernel_calls(*rt, kForward) == forward_calls + 1);
}

TEST_CASE("one-pixel convolutions: a DCGAN's layers through autograd, as a training step reaches them") {
  auto rt = test::start_cpu_runtime();
  if (!test::plan_lists_kernel(*rt, kForward)) return;  // said in the first case
  at::manual_seed(test_seed());
  // Layers like pytorch/examples' DCGAN's: the generator's first (noise 100 -> 256 at 4x4: the
  // GEMM path) and last (64 -> 1 image), the discriminator's first (1 image -> 64) and last
  // (a 14x14 map -> 1 logit: the GEMM path) - LibTorch's kernels between the plugin's.
  const std::vector<at::Tensor> params{at::randn({8, 100, 1, 1}), at::randn({100, 256, 4, 4}) * 0.05,
                                       at::randn({8, 64, 14, 14}), at::randn({64, 1, 4, 4}) * 0.05,
                                       at::randn({64, 1, 4, 4}) * 0.1, at::randn({1, 64, 14, 14}) * 0.02};
  // One step in `dtype`: the gradients of z's layer weight, the generator's last input and
  // weight, and the discriminator's two weights.
  auto step = [&](at::ScalarType dtype) {
    std::vector<at::Tensor> p;
    for (const auto& t : params) p.push_back(t.to(dtype).clone().requires_grad_(true));
    const test::Fp32Thread fp32;
    const at::Tensor a = at::conv_transpose2d(p[0], p[1]);                                     // 1x1 -> 4x4
    const at::Tensor image = at::tanh(at::conv_transpose2d(p[2], p[3], {}, {2, 2}, {1, 1}));  // 64 -> 1
    const at::Tensor f = at::leaky_relu(at::conv2d(image, p[4], {}, {2, 2}, {1, 1}), 0.2);     // 1 -> 64
    const at::Tensor logit = at::conv2d(f, p[5]);                                              // 14x14 -> 1x1
    (logit.sum() + a.square().mean()).backward();
    std::vector<at::Tensor> grads;
    for (size_t i = 1; i < p.size(); ++i) grads.push_back(p[i].grad().to(at::kDouble));
    return grads;
  };
  // First steps, not compared: the other layers' shapes are timed both ways on their first
  // 2 * kTrials calls (conv_choice.hpp); and LibTorch 2.13's first at::tanh in a process was
  // seen up to 5e-5 from its later calls on the same input (1 run in 15), which the leaky
  // ReLU's kinks then carry into every gradient.
  for (int i = 0; i < 2 * cpu::conv_choice::Table::kTrials; ++i) (void)step(at::kFloat);
  (void)step(at::kDouble);
  // Each step now runs the same kernels: the two one-pixel layers by the GEMM path, the others
  // by their kept path.
  std::uint64_t calls = test::required_kernel_calls(*rt, kForward);
  (void)step(at::kFloat);
  const std::uint64_t per_step = test::required_kernel_calls(*rt, kForward) - calls;
  CHECK(per_step >= 2);
  CHECK(per_step <= 4);
  calls = test::required_kernel_calls(*rt, kForward);
  const auto got = step(at::kFloat);
  CHECK(test::required_kernel_calls(*rt, kForward) == calls + per_step);
  const auto ref = step(at::kDouble);  // fp64: LibTorch's kernels
  rt->apply_precision(PrecisionPlan{});
  const auto lib = step(at::kFloat);  // the gate shut: LibTorch's kernels
  rt->apply_precision(rt->precision());
  CHECK(test::required_kernel_calls(*rt, kForward) == calls + per_step);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("gradient " << i);
    const double e = error(got[i], ref[i]), e_lib = error(lib[i], ref[i]);
    CAPTURE(e);
    CAPTURE(e_lib);
    CHECK(e <= 4 * e_lib + 2e-6);
  }
}

TEST_CASE("the GEMM path on convolutions of any shape, called directly, against LibTorch's kernel and fp64") {
  const test::Fp32Thread fp32;  // LibTorch's reference in fp32 (the path itself: the last case)
  std::mt19937 rng(test_seed() + 1);
  at::manual_seed(test_seed() + 1);
  int taken = 0;
  for (int i = 0; i < 200; ++i) {
    const Conv c = random_conv(rng);
    INFO(c.label());
    const at::Tensor x = layout(at::randn(c.input), c.channels_last);
    const at::Tensor w = layout(at::randn(c.weight), c.channels_last && i % 3 != 0);
    const at::Tensor b = at::randn({c.weight[c.transposed ? 1 : 0]});
    const auto g = cpu::conv_gemm::fit_any(x, w, {c.stride, c.padding, c.dilation, c.output_padding, c.transposed, 1});
    const at::Tensor lib = forward(c, x, w, b, true);
    if (!g) {
      // Only an output LibTorch's kernel refuses too, or one past the patch limit, is left out.
      CHECK(lib.numel() * c.weight[2] * c.weight[3] > 0);
      continue;
    }
    ++taken;
    REQUIRE(at::IntArrayRef(g->output_shape()) == lib.sizes());
    const at::Tensor got = cpu::conv_gemm::forward(x, w, c.bias ? c10::optional<at::Tensor>(b) : c10::nullopt, *g);
    auto fp64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
    auto fp64_abs = [](const at::Tensor& t) { return t.to(at::kDouble).abs(); };
    check_close(got, lib, forward(c, fp64(x), fp64(w), fp64(b), true),
                forward(c, fp64_abs(x), fp64_abs(w), fp64_abs(b), true), "output");

    const at::Tensor go = layout(at::randn(lib.sizes()), i % 2 == 0);
    const std::array<bool, 3> mask{i % 4 != 1, i % 4 != 2, c.bias};
    CAPTURE(mask[0]);
    CAPTURE(mask[1]);
    check_grads(c, go, x, w, mask, cpu::conv_gemm::backward(go, x, w, *g, mask));
  }
  CHECK(taken >= 190);
}

// A random NCHW convolution the GEMM path takes in its NCHW form (conv_planes.hpp): at least
// kMinPixels pixels on the small side, batches of 1 to 40 images (more than its 16 parts, so the
// weight and bias gradients are summed in parts of more than one image, and products of more
// than one image at a time), plain and transposed, strides, padding, dilation, output padding.
Conv random_nchw_conv(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (;;) {
    Conv c = random_conv(rng);
    c.channels_last = false;
    c.input[0] = pick(1, 40);
    if (c.transposed) {
      c.input[2] = pick(8, 16);
      c.input[3] = pick(8, 16);
      return c;
    }
    const int64_t span_h = c.dilation[0] * (c.weight[2] - 1) + 1, span_w = c.dilation[1] * (c.weight[3] - 1) + 1;
    c.input[2] = span_h - 2 * c.padding[0] + c.stride[0] * pick(7, 14);
    c.input[3] = span_w - 2 * c.padding[1] + c.stride[1] * pick(7, 14);
    if (c.input[2] >= span_h && c.input[3] >= span_w) return c;
  }
}

TEST_CASE("the GEMM path's NCHW form: image by image, against LibTorch's kernel and fp64, at any thread count") {
  if (!cpu::conv_planes::available()) {
    MESSAGE("skipped: this process has no BLAS sgemm_ (the GEMM path keeps its batch form)");
    return;
  }
  const test::Fp32Thread fp32;
  const int threads = at::get_num_threads();
  std::mt19937 rng(test_seed() + 3);
  at::manual_seed(test_seed() + 3);
  for (int i = 0; i < 60; ++i) {
    const Conv c = random_nchw_conv(rng);
    INFO(c.label());
    const at::Tensor x = at::randn(c.input), w = at::randn(c.weight), b = at::randn({c.weight[c.transposed ? 1 : 0]});
    const auto g = cpu::conv_gemm::fit_any(x, w, {c.stride, c.padding, c.dilation, c.output_padding, c.transposed, 1});
    REQUIRE(g.has_value());
    REQUIRE(g->OH * g->OW >= cpu::conv_planes::kMinPixels);
    const c10::optional<at::Tensor> bias = c.bias ? c10::optional<at::Tensor>(b) : c10::nullopt;
    const at::Tensor lib = forward(c, x, w, b, true);
    const at::Tensor got = cpu::conv_gemm::forward(x, w, bias, *g);
    auto fp64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
    auto fp64_abs = [](const at::Tensor& t) { return t.to(at::kDouble).abs(); };
    check_close(got, lib, forward(c, fp64(x), fp64(w), fp64(b), true),
                forward(c, fp64_abs(x), fp64_abs(w), fp64_abs(b), true), "output");
    // The form itself, not only the path: the same values as conv_planes::forward.
    CHECK(at::equal(got, cpu::conv_planes::forward(x, w, bias, *g)));

    const at::Tensor go = at::randn(lib.sizes());
    const std::array<bool, 3> mask{i % 4 != 1, i % 4 != 2, c.bias || i % 4 == 3};
    CAPTURE(mask[0]);
    CAPTURE(mask[1]);
    CAPTURE(mask[2]);
    const auto grads = cpu::conv_gemm::backward(go, x, w, *g, mask);
    check_grads(c, go, x, w, mask, grads);
    // On one thread: within the same error (the BLAS may round differently at another thread
    // count), and the bias gradient - fp64 sums in fixed parts - bit for bit the same.
    at::set_num_threads(1);
    const auto one = cpu::conv_planes::backward(go, x, w, *g, mask);
    at::set_num_threads(threads);
    check_grads(c, go, x, w, mask, one);
    if (mask[2]) CHECK(at::equal(std::get<2>(grads), std::get<2>(one)));
  }
}

TEST_CASE("the per-shape choice: trials in turn, warm-ups ignored, the GEMM path kept only past the margin") {
  using cpu::conv_choice::Path;
  using cpu::conv_choice::Table;
  constexpr int kTrials = Table::kTrials;
  static_assert(kTrials == 4, "the times below are four per path");
  // Runs one shape's trials with the given times (LibTorch's, the GEMM path's, in turn) until it
  // decides; what it kept, and after how many calls.
  auto decide = [](Table& t, const cpu::conv_choice::Key& key, const std::vector<double>& lib,
                   const std::vector<double>& gemm) {
    for (size_t i = 0;; ++i) {
      const auto turn = t.next(key);
      if (!turn.trial) {
        CHECK((t.next(key).path == turn.path));
        return std::pair<Path, size_t>{turn.path, i};
      }
      REQUIRE(i < 2 * kTrials);
      REQUIRE((turn.path == (i % 2 == 0 ? Path::libtorch : Path::gemm)));
      t.record(key, turn.path, (i % 2 == 0 ? lib : gemm)[i / 2]);
    }
  };
  using Kept = std::pair<Path, size_t>;
  Table t;
  // The first call of each is a warm-up: a slow first GEMM call does not count, nor a fast
  // first LibTorch one.
  CHECK((decide(t, {1}, {5.0, 10.0, 10.2, 10.1}, {40.0, 8.5, 8.8, 8.7}) == Kept{Path::gemm, 8}));
  CHECK((decide(t, {2}, {1.0, 10.0, 10.2, 10.1}, {9.5, 9.5, 9.4, 9.6}) == Kept{Path::libtorch, 8}));  // 0.92x
  CHECK((decide(t, {3}, {10.0, 12.0, 10.0, 11.0}, {9.0, 14.0, 8.9, 9.5}) == Kept{Path::gemm, 8}));  // the best of each
  CHECK((decide(t, {4}, {10.0, 10.0, 10.0, 10.0}, {9.0, 9.0, 9.0, 9.0}) == Kept{Path::libtorch, 8}));  // 0.9x: not below
  // Far slower after one counted call each (above 1.5x): LibTorch's at once.
  CHECK((decide(t, {5}, {10.0, 10.0, 1.0, 1.0}, {5.0, 16.0, 1.0, 1.0}) == Kept{Path::libtorch, 4}));
  CHECK((decide(t, {6}, {10.0, 10.0, 10.0, 10.0}, {5.0, 14.0, 8.0, 8.0}) == Kept{Path::gemm, 8}));  // 1.4x: go on
  const auto counts = t.counts();
  CHECK(counts.gemm == 3);
  CHECK(counts.libtorch == 3);
  CHECK(counts.trying == 0);
  // Turns handed out past the trials while some are still being timed (other threads): LibTorch's, untimed.
  for (int i = 0; i < 2 * kTrials; ++i) (void)t.next({7});
  const auto late = t.next({7});
  CHECK_FALSE(late.trial);
  CHECK((late.path == Path::libtorch));
  CHECK(t.counts().trying == 1);
  // A full table: further shapes take LibTorch's kernel, untimed, and nothing is added.
  Table full;
  for (std::size_t i = 0; i < Table::kMaxShapes; ++i) (void)full.next({static_cast<std::int64_t>(i), 7});
  const auto past = full.next({-1});
  CHECK_FALSE(past.trial);
  CHECK((past.path == Path::libtorch));
  CHECK(full.counts().trying == Table::kMaxShapes);
  // Keys differ in any number, and in length.
  CHECK(cpu::conv_choice::KeyHash{}({1, 2}) != cpu::conv_choice::KeyHash{}({2, 1}));
  CHECK(t.next({1, 0}).trial);
}

TEST_CASE("the per-shape choice: a kept GEMM path takes a second round, and stays only where that round agrees") {
  using cpu::conv_choice::Path;
  using cpu::conv_choice::Table;
  constexpr int kTrials = Table::kTrials;
  constexpr int kRecheckAfter = Table::kRecheckAfter;
  static_assert(kTrials == 4, "the times below are four per path");
  // One round of trials with the given times (LibTorch's, the GEMM path's, in turn), its first
  // turn already taken; what the round kept.
  auto round = [](Table& t, const cpu::conv_choice::Key& key, cpu::conv_choice::Turn turn, const std::vector<double>& lib,
                  const std::vector<double>& gemm) {
    for (size_t i = 0; turn.trial; ++i, turn = t.next(key)) {
      REQUIRE(i < 2 * kTrials);
      REQUIRE((turn.path == (i % 2 == 0 ? Path::libtorch : Path::gemm)));
      t.record(key, turn.path, (i % 2 == 0 ? lib : gemm)[i / 2]);
    }
    return turn.path;
  };
  // Calls of the kept path until the next trial (at most `limit`): how many, and that trial.
  auto kept_until_trial = [](Table& t, const cpu::conv_choice::Key& key, Path kept, int limit) {
    int calls = 0;
    cpu::conv_choice::Turn turn = t.next(key);
    for (; !turn.trial && calls < limit; turn = t.next(key)) {
      CHECK((turn.path == kept));
      ++calls;
    }
    return std::pair<int, cpu::conv_choice::Turn>{calls, turn};
  };
  const std::vector<double> slow{5.0, 10.0, 10.2, 10.1}, fast{40.0, 8.5, 8.8, 8.7};  // 0.84x: the GEMM path's
  Table t;
  // The first round keeps the GEMM path on each; its first call is the round's last turn.
  for (const std::int64_t k : {1, 2}) CHECK((round(t, {k}, t.next({k}), slow, fast) == Path::gemm));
  // Confirmed: the second round finds the GEMM path past the margin again; then no more trials.
  auto [calls, turn] = kept_until_trial(t, {1}, Path::gemm, 1000);
  CHECK(calls == kRecheckAfter - 2);  // with the round's last turn, kRecheckAfter - 1 kept calls; then the trial
  REQUIRE(turn.trial);
  CHECK((t.counts().trying == 1));
  CHECK((round(t, {1}, turn, {30.0, 10.0, 10.1, 10.0}, {30.0, 8.7, 8.6, 8.9}) == Path::gemm));
  CHECK(kept_until_trial(t, {1}, Path::gemm, 1000).first == 1000);
  // Dropped: the second round reads the GEMM path at 0.95x, short of the margin; LibTorch's
  // kernel for good.
  std::tie(calls, turn) = kept_until_trial(t, {2}, Path::gemm, 1000);
  CHECK(calls == kRecheckAfter - 2);
  REQUIRE(turn.trial);
  CHECK((round(t, {2}, turn, {10.0, 10.0, 10.1, 10.0}, {9.6, 9.5, 9.6, 9.7}) == Path::libtorch));
  CHECK(kept_until_trial(t, {2}, Path::libtorch, 1000).first == 1000);
  // LibTorch's kernel kept by the first round is not timed again.
  CHECK((round(t, {3}, t.next({3}), {1.0, 10.0, 10.2, 10.1}, {9.5, 9.5, 9.4, 9.6}) == Path::libtorch));
  CHECK(kept_until_trial(t, {3}, Path::libtorch, 1000).first == 1000);
  const auto counts = t.counts();
  CHECK(counts.gemm == 1);
  CHECK(counts.confirmed == 1);
  CHECK(counts.libtorch == 2);
  CHECK(counts.dropped == 1);
  CHECK(counts.trying == 0);
}

// A channels-last shape's calls through the dispatcher, forward and backward (every gradient),
// each checked against LibTorch's kernel and fp64; which took LibTorch's kernel ('0') or the
// plugin's ('1': the GEMM or the Winograd path), call by call, forward then backward.
std::pair<std::string, std::string> through_dispatcher(Runtime& rt, const Conv& c, bool weight_channels_last,
                                                       int calls) {
  const at::Tensor x = layout(at::randn(c.input), true), w = layout(at::randn(c.weight), weight_channels_last);
  const at::Tensor b = at::randn({c.weight[0]});
  auto fp64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
  auto fp64_abs = [](const at::Tensor& t) { return t.to(at::kDouble).abs(); };
  const at::Tensor lib = forward(c, x, w, b, true);
  const at::Tensor ref = forward(c, fp64(x), fp64(w), fp64(b), true);
  const at::Tensor magnitude = forward(c, fp64_abs(x), fp64_abs(w), fp64_abs(b), true);
  const at::Tensor go = layout(at::randn(lib.sizes()), true);
  const std::array<bool, 3> mask{true, true, true};
  std::string fwd, bwd;
  for (int i = 0; i < calls; ++i) {
    CAPTURE(i);
    const std::uint64_t f0 = test::required_kernel_calls(rt, kForward), b0 = test::required_kernel_calls(rt, kBackward);
    check_close(forward(c, x, w, b, false), lib, ref, magnitude, "output");
    const auto got = backward(c, go, x, w, mask, false);
    fwd += test::required_kernel_calls(rt, kForward) == f0 ? '0' : '1';
    bwd += test::required_kernel_calls(rt, kBackward) == b0 ? '0' : '1';
    check_grads(c, go, x, w, mask, got);
  }
  return {fwd, bwd};
}

TEST_CASE("the per-shape choice among three paths: each in turn, the slow dropped, the fastest past the margin kept") {
  using cpu::conv_choice::bit;
  using cpu::conv_choice::Path;
  using cpu::conv_choice::Table;
  constexpr int kTrials = Table::kTrials;
  static_assert(kTrials == 4, "the times below are four per path");
  const auto both = static_cast<cpu::conv_choice::Paths>(bit(Path::gemm) | bit(Path::winograd));
  // Runs a shape's first round with times by path (LibTorch's, the GEMM path's, Winograd's); the
  // paths of its trial turns in order, and what it kept.
  auto decide = [&](Table& t, const cpu::conv_choice::Key& key, const std::array<std::vector<double>, 3>& times) {
    std::vector<Path> turns;
    std::array<size_t, 3> used{};
    for (;;) {
      const auto turn = t.next(key, both);
      if (!turn.trial) return std::pair<std::vector<Path>, Path>{turns, turn.path};
      REQUIRE(turns.size() < 3 * kTrials);
      turns.push_back(turn.path);
      const auto i = static_cast<size_t>(turn.path);
      t.record(key, turn.path, times[i][used[i]++]);
    }
  };
  const Path L = Path::libtorch, G = Path::gemm, W = Path::winograd;
  Table t;
  // All three timed to the end, in turn; the fastest past the margin kept (Winograd's 7.1 against
  // the GEMM path's 8.5 and LibTorch's 10.0).
  auto r = decide(t, {1}, {{{5.0, 10.0, 10.2, 10.1}, {40.0, 8.5, 8.8, 8.7}, {30.0, 7.5, 7.1, 7.3}}});
  CHECK((r.first == std::vector<Path>{L, G, W, L, G, W, L, G, W, L, G, W}));
  CHECK((r.second == W));
  // The GEMM path far slower after one counted call: dropped, the other two go on in turn.
  r = decide(t, {2}, {{{5.0, 10.0, 10.2, 10.1}, {40.0, 20.0}, {30.0, 7.5, 7.1, 7.3}}});
  CHECK((r.first == std::vector<Path>{L, G, W, L, G, W, L, W, L, W}));
  CHECK((r.second == W));
  // Both far slower: LibTorch's at once.
  r = decide(t, {3}, {{{5.0, 10.0}, {40.0, 20.0}, {30.0, 16.0}}});
  CHECK((r.first == std::vector<Path>{L, G, W, L, G, W}));
  CHECK((r.second == L));
  // Neither past the margin (0.92x, 0.95x): LibTorch's.
  r = decide(t, {4}, {{{1.0, 10.0, 10.2, 10.1}, {9.5, 9.2, 9.4, 9.6}, {9.5, 9.5, 9.6, 9.7}}});
  CHECK((r.second == L));
  // The GEMM path the faster of two past the margin.
  r = decide(t, {5}, {{{1.0, 10.0, 10.2, 10.1}, {9.5, 7.0, 7.4, 7.6}, {9.5, 8.5, 8.6, 8.7}}});
  CHECK((r.second == G));
  const auto counts = t.counts();
  CHECK(counts.winograd == 2);
  CHECK(counts.gemm == 1);
  CHECK(counts.libtorch == 2);
  // A kept Winograd path takes a second round of all three after kRecheckAfter calls, whose
  // choice is for good: here LibTorch's.
  int calls = 0;
  cpu::conv_choice::Turn turn = t.next({1}, both);
  for (; !turn.trial && calls < 1000; turn = t.next({1}, both)) {
    CHECK((turn.path == W));
    ++calls;
  }
  CHECK(calls == Table::kRecheckAfter - 2);  // with the call that ended the round, kRecheckAfter - 1
  REQUIRE(turn.trial);
  const std::array<std::vector<double>, 3> second{{{9.0, 9.0, 9.1, 9.0}, {20.0, 18.0}, {9.0, 9.5, 9.4, 9.6}}};
  std::array<size_t, 3> used{};
  for (; turn.trial; turn = t.next({1}, both)) {
    const auto i = static_cast<size_t>(turn.path);
    t.record({1}, turn.path, second[i][used[i]++]);
  }
  CHECK((turn.path == L));
  for (int i = 0; i < 100; ++i) CHECK_FALSE(t.next({1}, both).trial);
  CHECK(t.counts().dropped == 1);
}

TEST_CASE("the per-shape choice through the dispatcher: every call within LibTorch's error, each round's kept path") {
  auto rt = test::start_cpu_runtime();
  const test::Fp32Thread fp32;
  if (!test::plan_lists_kernel(*rt, kForward)) return;  // said in the first case
  at::manual_seed(test_seed() + 2);
  constexpr int kTrials = cpu::conv_choice::Table::kTrials;
  constexpr int kRecheckAfter = cpu::conv_choice::Table::kRecheckAfter;
  // A shape no other case uses: a discriminator's middle layer, 4x4 stride 2 from 9x9 to 4x4.
  const Conv c{{3, 11, 9, 9}, {13, 11, 4, 4}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, false, true, true};
  // Enough calls for both rounds of trials where the GEMM path is kept after the first.
  const auto calls = through_dispatcher(*rt, c, true, 4 * kTrials + kRecheckAfter + 4);
  for (const std::string& paths : {calls.first, calls.second}) {
    // A round of trials: LibTorch's kernel, then the GEMM path, in turn - 2 * kTrials calls, or
    // fewer where the GEMM path was far slower and LibTorch's kernel is kept; then the kept path.
    // A GEMM path kept by the first round takes kRecheckAfter - 1 calls, then a second round;
    // the second round's choice is for good.
    CAPTURE(paths);
    size_t at = 0;
    for (int round = 0; round < 2; ++round) {
      CAPTURE(round);
      size_t alternating = 0;
      while (alternating < 2 * kTrials && at + alternating < paths.size() &&
             paths[at + alternating] == (alternating % 2 == 0 ? '0' : '1'))
        ++alternating;
      REQUIRE(alternating >= 4);
      const size_t trials = alternating;
      REQUIRE(at + trials < paths.size());
      const char kept = trials < 2 * kTrials ? '0' : paths[at + trials];
      at += trials;
      if (kept == '0' || round == 1) {
        for (; at < paths.size(); ++at) CHECK(paths[at] == kept);
        break;
      }
      for (int k = 0; k < kRecheckAfter - 1; ++k, ++at) CHECK(paths[at] == '1');
    }
  }
  // The read-back says how the shapes timed so far went.
  auto precision = rt->device_handle()->precision();
  REQUIRE(precision.ok());
  const auto values = precision.value()->read_back();
  REQUIRE(values.ok());
  std::string said;
  for (const auto& v : values.value())
    if (v.key == "convolution_shapes") said = v.value;
  CHECK(said.find(" by the GEMM path") != std::string::npos);
  CHECK(said.find(" by LibTorch's kernel") != std::string::npos);
}

TEST_CASE("a channels-last 3x3 stride-1 layer through the dispatcher: three paths in turn, every call within LibTorch's error") {
  auto rt = test::start_cpu_runtime();
  const test::Fp32Thread fp32;
  if (!test::plan_lists_kernel(*rt, kForward)) return;  // said in the first case
  if (!cpu::conv_winograd::eligible(at::empty({1, 1, 3, 3}), at::empty({1, 1, 3, 3}), {1, 1}, {1, 1}, {1, 1}, false,
                                    1)) {
    MESSAGE("skipped: the Winograd path needs a CPU with AVX2 and FMA");
    return;
  }
  at::manual_seed(test_seed() + 5);
  // A shape no other case uses: a ResNet's body layer, 12 channels over 10x10, padding 1, bias.
  const Conv c{{3, 12, 10, 10}, {12, 12, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, false, true, true};
  constexpr int kTrials = cpu::conv_choice::Table::kTrials;
  const auto calls = through_dispatcher(*rt, c, false, 6 * kTrials + cpu::conv_choice::Table::kRecheckAfter + 4);
  const std::string& fwd = calls.first;
  const std::string& bwd = calls.second;
  CAPTURE(fwd);
  CAPTURE(bwd);
  // The first turns of the three: LibTorch's kernel, the GEMM path, the Winograd path, twice,
  // before any is dropped.
  CHECK(fwd.substr(0, 6) == "011011");
  CHECK(bwd.substr(0, 6) == "011011");
}

TEST_CASE("a channels-last 1x1 convolution's strided weight gradient: LibTorch's hazard goes to the GEMM path") {
  auto rt = test::start_cpu_runtime();
  const test::Fp32Thread fp32;
  if (!test::plan_lists_kernel(*rt, kForward)) return;  // said in the first case
  at::manual_seed(test_seed() + 3);
  // 8 input channels over 12x12 at stride 2: LibTorch's own kernel (the 2.13 wheel's and
  // Debian's 1.13) corrupted the heap here within a few calls ("corrupted size vs. prev_size").
  const Conv c{{3, 8, 12, 12}, {16, 8, 1, 1}, {2, 2}, {0, 0}, {1, 1}, {0, 0}, false, true, true};
  const at::Tensor x = layout(at::randn(c.input), true), w = at::randn(c.weight);
  auto fp64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
  const at::Tensor go = layout(at::randn({3, 16, 6, 6}), true);
  for (const std::array<bool, 3> mask : {std::array<bool, 3>{true, true, true}, std::array<bool, 3>{false, true, false}}) {
    const auto ref = backward(c, fp64(go), fp64(x), fp64(w), mask, true);
    for (int i = 0; i < 20; ++i) {
      CAPTURE(i);
      const std::uint64_t before = test::required_kernel_calls(*rt, kBackward);
      const auto got = backward(c, go, x, w, mask, false);
      CHECK(test::required_kernel_calls(*rt, kBackward) == before + 1);  // every call by the GEMM path
      CHECK(error(std::get<1>(got), std::get<1>(ref)) < 1e-5);
      if (mask[0]) CHECK(error(std::get<0>(got), std::get<0>(ref)) < 1e-5);
      if (mask[2]) CHECK(error(std::get<2>(got), std::get<2>(ref)) < 1e-5);
    }
  }
}

// A backward pass reaches the plugin's kernel with the thread's autocast on where the forward ran
// outside it (an fp32 step whose backward() is called after its autocast() scope closed, with
// the plan's bf16 autocast on the thread): fp32 tensors in, fp32 results out, not autocast's
// bf16 products.
TEST_CASE("the GEMM path with the thread's autocast on: fp32 in, fp32 out, within LibTorch's error") {
  auto rt = test::start_cpu_runtime();
  if (!test::plan_lists_kernel(*rt, kForward)) return;  // said in the first case
  at::manual_seed(test_seed() + 4);
  // A 1x1 output: the GEMM path on every call.
  const Conv c{{4, 9, 5, 5}, {6, 9, 5, 5}, {1, 1}, {0, 0}, {1, 1}, {0, 0}, false, true, false};
  const at::Tensor x = at::randn(c.input), w = at::randn(c.weight), b = at::randn({6});
  const std::array<bool, 3> mask{true, true, true};
  auto fp64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
  auto fp64_abs = [](const at::Tensor& t) { return t.to(at::kDouble).abs(); };
  at::Tensor lib, ref, magnitude, go;
  {
    const test::Fp32Thread fp32;
    lib = forward(c, x, w, b, true);
    ref = forward(c, fp64(x), fp64(w), fp64(b), true);
    magnitude = forward(c, fp64_abs(x), fp64_abs(w), fp64_abs(b), true);
    go = at::randn(lib.sizes());
  }
  const std::uint64_t f0 = test::required_kernel_calls(*rt, kForward), b0 = test::required_kernel_calls(*rt, kBackward);
  at::Tensor got;
  std::tuple<at::Tensor, at::Tensor, at::Tensor> grads;
  {
    compat::AutocastGuard bf16(at::kCPU, true, at::kBFloat16);
    got = forward(c, x, w, b, false);  // at::convolution: not one of autocast's ops
    grads = backward(c, go, x, w, mask, false);
  }
  CHECK(test::required_kernel_calls(*rt, kForward) == f0 + 1);
  CHECK(test::required_kernel_calls(*rt, kBackward) == b0 + 1);
  const test::Fp32Thread fp32;
  check_close(got, lib, ref, magnitude, "output");
  check_grads(c, go, x, w, mask, grads);
}

// bf16's rounding of a result, relative to its largest value (2^-9), twice over.
constexpr double kBf16Slack = 1.0 / 256;

TEST_CASE("bf16 convolutions: the weight gradient by one bf16 GEMM, called directly, against LibTorch's kernel and fp64") {
  const test::Fp32Thread as_given;
  std::mt19937 rng(test_seed() + 3);
  at::manual_seed(test_seed() + 3);
  auto fp64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
  auto fp64_abs = [](const at::Tensor& t) { return t.to(at::kDouble).abs(); };
  const std::array<bool, 3> weight_only{false, true, false};
  if (!compat::kBf16MatmulSumsInFp32) {
    const at::Tensor x = at::randn({2, 3, 8, 8}).to(at::kBFloat16), w = at::randn({4, 3, 4, 4}).to(at::kBFloat16);
    const at::Tensor go = at::randn({2, 4, 4, 4}).to(at::kBFloat16);
    CHECK_FALSE(cpu::conv_gemm::fit_bf16_weight_grad(go, x, w, {{2, 2}, {1, 1}, {1, 1}, {0, 0}, false, 1}).has_value());
    MESSAGE("skipped: this LibTorch's bf16 at::mm sums in bf16, so the path takes no bf16 convolution here");
    return;
  }
  int against_libtorch = 0, against_fp64 = 0;  // the second: where LibTorch has no bf16 kernel (1.x, transposed)
  for (int i = 0; i < 120; ++i) {
    const Conv c = random_conv(rng);
    INFO(c.label());
    const auto bf16 = [](const at::Tensor& t) { return t.to(at::kBFloat16); };
    const at::Tensor x = layout(bf16(at::randn(c.input)), c.channels_last);
    const at::Tensor w = layout(bf16(at::randn(c.weight)), c.channels_last && i % 3 != 0);
    const cpu::conv_gemm::ConvArgs args{c.stride, c.padding, c.dilation, c.output_padding, c.transposed, 1};
    const auto fp32 = [](const at::Tensor& t) { return t.to(at::kFloat); };
    const at::Tensor go = layout(bf16(at::randn(forward(c, fp32(x), fp32(w), at::Tensor(), true).sizes())), i % 2 == 0);
    const auto g = cpu::conv_gemm::fit_bf16_weight_grad(go, x, w, args);
    if (!g) {
      CHECK(go.numel() * c.weight[2] * c.weight[3] > 0);  // only past the patch limit
      continue;
    }
    CHECK_FALSE(cpu::conv_gemm::fit_bf16_weight_grad(go.to(at::kFloat), x, w, args).has_value());
    CHECK_FALSE(cpu::conv_gemm::fit_any(x, w, args).has_value());  // the fp32 path's fit: fp32 only
    const at::Tensor got = cpu::conv_gemm::weight_grad(go, x, w, *g);
    CHECK((got.scalar_type() == at::kBFloat16));
    // LibTorch's bf16 kernel as the reference where it has one for the shape and its result is
    // a number (the 2.13 wheel's gave NaN now and then for a channels-last transposed 4x3 layer
    // with output padding, on a Zen 4 EPYC); else fp64 alone, within bf16's own rounding.
    at::Tensor lib;
    try {
      lib = std::get<1>(backward(c, go, x, w, weight_only, true));
    } catch (const std::exception&) {  // c10::Error, or oneDNN's own (1.x, dilated)
      lib = at::Tensor();
    }
    const at::Tensor ref = std::get<1>(backward(c, fp64(go), fp64(x), fp64(w), weight_only, true));
    const at::Tensor magnitude = std::get<1>(backward(c, fp64_abs(go), fp64_abs(x), fp64_abs(w), weight_only, true));
    if (lib.defined() && lib.to(at::kFloat).isfinite().all().item<bool>()) {
      check_close(got, lib, ref, magnitude, "grad_weight", kBf16Slack);
      ++against_libtorch;
    } else {
      const double e = error(got, ref, magnitude);
      CAPTURE(e);
      CHECK(e <= kBf16Slack);
      ++against_fp64;
    }
  }
  MESSAGE(against_libtorch << " bf16 weight gradients checked against LibTorch's kernel and fp64, " << against_fp64
                           << " against fp64 alone (no bf16 kernel, or a non-finite result, in this LibTorch)");
  CHECK(against_libtorch + against_fp64 >= 110);
  CHECK(against_libtorch >= 40);
}

TEST_CASE("a bf16 convolution's backward through the dispatcher: LibTorch's kernel and the split path in turn, every call within LibTorch's error") {
  auto rt = test::start_cpu_runtime();
  const test::Fp32Thread as_given;
  if (!test::plan_lists_kernel(*rt, kBackward)) return;  // said in the first case
  at::manual_seed(test_seed() + 4);
  constexpr int kTrials = cpu::conv_choice::Table::kTrials;
  // A discriminator's middle layer in bf16 (a shape no other case uses), NCHW: 4x4 stride 2.
  const Conv c{{5, 12, 10, 10}, {14, 12, 4, 4}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, false, true, false};
  const auto bf16 = [](const at::Tensor& t) { return t.to(at::kBFloat16); };
  const at::Tensor x = bf16(at::randn(c.input)), w = bf16(at::randn(c.weight));
  const at::Tensor go = bf16(at::randn(forward(c, x, w, at::Tensor(), true).sizes()));
  // Where the path takes no bf16 convolution (LibTorch 1.x), every call is LibTorch's kernel.
  const std::string first_calls = compat::kBf16MatmulSumsInFp32 ? "0101" : "0000";
  for (const std::array<bool, 3> mask : {std::array<bool, 3>{true, true, true}, std::array<bool, 3>{false, true, false}}) {
    CAPTURE(mask[0]);
    std::string paths;
    for (int i = 0; i < 2 * kTrials + 4; ++i) {
      CAPTURE(i);
      const std::uint64_t b0 = test::required_kernel_calls(*rt, kBackward);
      const auto got = backward(c, go, x, w, mask, false);
      paths += test::required_kernel_calls(*rt, kBackward) == b0 ? '0' : '1';
      if (mask[1]) CHECK((std::get<1>(got).scalar_type() == at::kBFloat16));
      check_grads(c, go, x, w, mask, got, kBf16Slack);
    }
    CAPTURE(paths);
    // LibTorch's kernel, then the split path, each a warm-up and a timed call.
    CHECK(paths.substr(0, 4) == first_calls);
    if (!compat::kBf16MatmulSumsInFp32) CHECK(paths.find('1') == std::string::npos);
  }
  // Without the weight gradient there is nothing for the GEMM: LibTorch's kernel, untimed.
  const std::uint64_t b0 = test::required_kernel_calls(*rt, kBackward);
  check_grads(c, go, x, w, {true, false, false}, backward(c, go, x, w, {true, false, false}, false), kBf16Slack);
  CHECK(test::required_kernel_calls(*rt, kBackward) == b0);
}

}  // namespace conv_gemm_suite
