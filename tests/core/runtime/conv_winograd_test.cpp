// The CPU plugin's Winograd F(2x2,3x3) convolution (plugins/cpu/conv_winograd.hpp), called
// directly, against fp64 on fresh random inputs: forward (bias or none), the input gradient and
// the weight gradient, any channel counts (not only multiples of 8 or 16), odd and even image
// sizes down to one pixel, padding 0 or 1 in each dimension, NCHW and channels-last inputs, the
// same values at any thread count; ResNet-20's layers; and the convolutions it leaves to
// LibTorch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "torch_doctest.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "conv_winograd.hpp"
#include "test_support.hpp"

namespace conv_winograd_suite {

using namespace accelkit;
using accelkit::test::test_seed;

namespace {

struct Conv {
  int64_t n = 1, c = 1, k = 1, h = 1, w = 1;
  int64_t pad[2] = {1, 1};
  bool bias = false;
  bool channels_last = false;
  std::string label() const {
    return "input " + std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) +
           " weight " + std::to_string(k) + "x" + std::to_string(c) + "x3x3 padding " + std::to_string(pad[0]) + "," +
           std::to_string(pad[1]) + (bias ? " bias" : "") + (channels_last ? " channels-last" : "");
  }
  std::vector<int64_t> padding() const { return {pad[0], pad[1]}; }
};

bool available() {
  const at::Tensor x = at::zeros({1, 1, 3, 3}), w = at::zeros({1, 1, 3, 3});
  return cpu::conv_winograd::eligible(x, w, {1, 1}, {1, 1}, {1, 1}, false, 1);
}

at::Tensor layout(const at::Tensor& t, bool channels_last) {
  return channels_last ? t.contiguous(at::MemoryFormat::ChannelsLast) : t.contiguous();
}

at::Tensor fp64(const at::Tensor& t) { return t.to(at::kDouble); }
at::Tensor fp64_abs(const at::Tensor& t) { return t.to(at::kDouble).abs(); }

// The largest error against fp64, relative to the largest of the same sums of |terms|
// (`magnitude`): the results themselves cancel.
double error(const at::Tensor& got, const at::Tensor& want, const at::Tensor& magnitude) {
  const double scale = magnitude.max().item<double>();
  return (got.to(at::kDouble) - want).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
}

// The error allowed for sums of `terms` products: a few times fp32's epsilon times the square
// root of their count. LibTorch's fp32 kernel stays well within it; the transforms' own
// rounding (a few additions each) costs a small factor; a wrong index or a missing term is off
// by the size of one term, 1 / terms of the magnitude or more. The output and the input
// gradient sum 9 C products (C: the channels summed over); the weight gradient one per output
// pixel of the batch.
double bound_of_terms(int64_t terms) {
  return 4.0 * std::numeric_limits<float>::epsilon() * std::sqrt(static_cast<double>(terms));
}
double bound(int64_t c) { return bound_of_terms(9 * c); }

void check_close(const at::Tensor& got, const at::Tensor& want, const at::Tensor& magnitude, double allowed,
                 const std::string& what) {
  CAPTURE(what);
  REQUIRE(got.sizes() == want.sizes());
  CHECK((got.scalar_type() == at::kFloat));
  const double e = error(got, want, magnitude);
  CAPTURE(e);
  CAPTURE(allowed);
  CHECK(e <= allowed);
}

// Forward and input gradient of c on fresh random values, against fp64; with `one_thread`, also
// the same values on one thread.
void check_conv(const Conv& c, bool one_thread) {
  INFO(c.label());
  const at::Tensor x = layout(at::randn({c.n, c.c, c.h, c.w}), c.channels_last);
  const at::Tensor w = layout(at::randn({c.k, c.c, 3, 3}), c.channels_last && c.k % 2 == 0);
  const at::Tensor b = at::randn({c.k});
  const std::vector<int64_t> stride{1, 1}, dilation{1, 1}, padding = c.padding();
  REQUIRE(cpu::conv_winograd::eligible(x, w, stride, padding, dilation, false, 1));
  const c10::optional<at::Tensor> bias = c.bias ? c10::optional<at::Tensor>(b) : c10::nullopt;
  const c10::optional<at::Tensor> bias64 = c.bias ? c10::optional<at::Tensor>(fp64(b)) : c10::nullopt;
  const c10::optional<at::Tensor> bias_abs = c.bias ? c10::optional<at::Tensor>(fp64_abs(b)) : c10::nullopt;

  const at::Tensor got = cpu::conv_winograd::forward(x, w, bias, padding);
  const at::Tensor ref = at::conv2d(fp64(x), fp64(w), bias64, stride, padding);
  CHECK(got.is_contiguous(at::MemoryFormat::ChannelsLast));
  check_close(got, ref, at::conv2d(fp64_abs(x), fp64_abs(w), bias_abs, stride, padding), bound(c.c), "output");

  const at::Tensor g = layout(at::randn(ref.sizes()), !c.channels_last);
  const at::Tensor grad = cpu::conv_winograd::input_grad(g, w, x.sizes(), padding);
  auto grad_input = [&](const at::Tensor& go, const at::Tensor& wt, const at::Tensor& xt) {
    return std::get<0>(at::convolution_backward(go, xt, wt, c10::nullopt, stride, padding, dilation, false, {0, 0}, 1,
                                                {true, false, false}));
  };
  CHECK(grad.is_contiguous(at::MemoryFormat::ChannelsLast));
  check_close(grad, grad_input(fp64(g), fp64(w), fp64(x)), grad_input(fp64_abs(g), fp64_abs(w), fp64(x)), bound(c.k),
              "grad_input");

  // The weight gradient: sums over every output pixel of the batch; channels-last, as LibTorch's
  // kernel gives it for a channels-last input (the only one the dispatcher passes on).
  const at::Tensor grad_w = cpu::conv_winograd::weight_grad(g, x, w, padding);
  auto grad_weight = [&](const at::Tensor& go, const at::Tensor& xt, const at::Tensor& wt) {
    return std::get<1>(at::convolution_backward(go, xt, wt, c10::nullopt, stride, padding, dilation, false, {0, 0}, 1,
                                                {false, true, false}));
  };
  CHECK(grad_w.is_contiguous(at::MemoryFormat::ChannelsLast));
  check_close(grad_w, grad_weight(fp64(g), fp64(x), fp64(w)), grad_weight(fp64_abs(g), fp64_abs(x), fp64(w)),
              bound_of_terms(g.size(0) * g.size(2) * g.size(3)), "grad_weight");

  if (one_thread) {
    // Each tile's sums run in the same order whatever thread takes it.
    const int threads = at::get_num_threads();
    at::set_num_threads(1);
    const at::Tensor got1 = cpu::conv_winograd::forward(x, w, bias, padding);
    const at::Tensor grad1 = cpu::conv_winograd::input_grad(g, w, x.sizes(), padding);
    const at::Tensor grad_w1 = cpu::conv_winograd::weight_grad(g, x, w, padding);
    at::set_num_threads(threads);
    CHECK(at::equal(got, got1));
    CHECK(at::equal(grad, grad1));
    // The weight gradient's sums are split by thread: within the bound, not equal.
    check_close(grad_w1, grad_weight(fp64(g), fp64(x), fp64(w)), grad_weight(fp64_abs(g), fp64_abs(x), fp64(w)),
                bound_of_terms(g.size(0) * g.size(2) * g.size(3)), "grad_weight on one thread");
  }
}

}  // namespace

TEST_CASE("the Winograd convolution on random shapes against fp64, forward and input gradient") {
  if (!available()) {
    MESSAGE("skipped: this CPU lacks AVX2 or FMA (the Winograd path's ISA)");
    return;
  }
  std::mt19937 rng(static_cast<std::mt19937::result_type>(test_seed()));
  at::manual_seed(test_seed());
  auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  for (int i = 0; i < 160; ++i) {
    Conv c;
    c.n = pick(1, 5);
    // Half the draws any count, the others a multiple of 8 (the fast paths) near it.
    c.c = pick(0, 1) ? pick(1, 70) : 8 * pick(1, 8);
    c.k = pick(0, 1) ? pick(1, 70) : 8 * pick(1, 8);
    c.pad[0] = pick(0, 1);
    c.pad[1] = pick(0, 1);
    // At least one output pixel: 3 - 2 p pixels or more.
    c.h = pick(static_cast<int>(3 - 2 * c.pad[0]), 19);
    c.w = pick(static_cast<int>(3 - 2 * c.pad[1]), 19);
    c.bias = pick(0, 1) == 1;
    c.channels_last = pick(0, 1) == 1;
    check_conv(c, i % 8 == 0);
  }
}

TEST_CASE("the Winograd convolution on ResNet-20's 3x3 layers against fp64") {
  if (!available()) {
    MESSAGE("skipped: this CPU lacks AVX2 or FMA (the Winograd path's ISA)");
    return;
  }
  at::manual_seed(test_seed() + 1);
  // C, K, size, batch: the first at a batch whose weight gradient sums 32768 pixels a value.
  const int64_t layers[][4] = {{16, 16, 32, 32}, {32, 32, 16, 3}, {64, 64, 8, 4}, {3, 16, 32, 5}};
  for (const auto& l : layers) {
    Conv c;
    c.n = l[3];
    c.c = l[0], c.k = l[1], c.h = c.w = l[2];
    c.channels_last = true;
    c.bias = l[0] == 3;
    check_conv(c, true);
  }
}

TEST_CASE("the Winograd convolution: sizes at the edges - one pixel, one channel, padding on one side") {
  if (!available()) {
    MESSAGE("skipped: this CPU lacks AVX2 or FMA (the Winograd path's ISA)");
    return;
  }
  at::manual_seed(test_seed() + 2);
  const int64_t shapes[][7] = {
      // n, c, k, h, w, pad h, pad w
      {1, 1, 1, 1, 1, 1, 1},   {1, 1, 1, 3, 3, 0, 0},   {2, 1, 17, 2, 5, 1, 0},  {1, 9, 1, 4, 3, 0, 1},
      {3, 7, 15, 5, 7, 1, 1},  {1, 256, 8, 4, 4, 1, 1}, {2, 128, 20, 3, 6, 0, 1}, {1, 24, 256, 6, 5, 1, 1},
      {1, 300, 33, 3, 3, 1, 0}};
  for (const auto& s : shapes) {
    Conv c;
    c.n = s[0], c.c = s[1], c.k = s[2], c.h = s[3], c.w = s[4], c.pad[0] = s[5], c.pad[1] = s[6];
    check_conv(c, false);
    c.bias = true;
    c.channels_last = true;
    check_conv(c, false);
  }
}

TEST_CASE("the Winograd convolution leaves other convolutions to LibTorch") {
  const at::Tensor x = at::randn({2, 4, 8, 8}), w = at::randn({5, 4, 3, 3});
  const std::vector<int64_t> one{1, 1}, zero{0, 0};
  using cpu::conv_winograd::eligible;
  if (available()) {
    CHECK(eligible(x, w, one, one, one, false, 1));
    CHECK(eligible(x, w, {1}, {0}, {1}, false, 1));
    CHECK(eligible(x.contiguous(at::MemoryFormat::ChannelsLast), w, one, {0, 1}, one, false, 1));
  }
  CHECK_FALSE(eligible(x, w, {2, 2}, one, one, false, 1));
  CHECK_FALSE(eligible(x, w, {1, 2}, one, one, false, 1));
  CHECK_FALSE(eligible(x, at::randn({5, 4, 5, 5}), one, one, one, false, 1));
  CHECK_FALSE(eligible(x, at::randn({5, 4, 3, 1}), one, one, one, false, 1));
  CHECK_FALSE(eligible(x, w, one, one, {2, 2}, false, 1));
  CHECK_FALSE(eligible(x, w, one, {2, 2}, one, false, 1));
  CHECK_FALSE(eligible(x, at::randn({6, 2, 3, 3}), one, one, one, false, 2));
  CHECK_FALSE(eligible(x.to(at::kDouble), w.to(at::kDouble), one, one, one, false, 1));
  CHECK_FALSE(eligible(x, at::randn({4, 5, 3, 3}), one, one, one, true, 1));
  CHECK_FALSE(eligible(at::randn({1, 4, 2, 2}), w, one, zero, one, false, 1));  // no output pixel
  CHECK_FALSE(eligible(at::randn({1, 3, 8, 8}), w, one, one, one, false, 1));  // channels differ
}

}  // namespace conv_winograd_suite
