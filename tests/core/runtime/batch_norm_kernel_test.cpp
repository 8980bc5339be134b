// The CPU plugin's training-mode batch normalisation (plugins/cpu/batch_norm_op.hpp) through a
// Runtime on the built CPU plugin, against LibTorch's own kernel (straight to it, as the
// dispatcher would call it with the plugin gone) and fp64, on fresh random inputs: channels-last,
// [N, C] and NCHW-style tensors of 2 to 5 dimensions, with and without weight, bias and running
// statistics, inputs far from zero - the output, save_mean, save_invstd, the running statistics
// and the three gradients (each backward against fp64 from the statistics its forward saved);
// the same bits at any number of threads; a BatchNorm2d module's step through autograd. Eval
// mode, other dtypes and strides, and a shut gate stay LibTorch's.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/ops/native_batch_norm_backward_cpu_dispatch.h>
#include <ATen/ops/native_batch_norm_cpu_dispatch.h>
#include <torch/torch.h>

#include "torch_doctest.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "accelkit/runtime.hpp"
#include "accelkit/sdk/device.hpp"
#include "cpu_runtime.hpp"
#include "test_support.hpp"

namespace batch_norm_kernel_suite {

using namespace accelkit;
using accelkit::test::test_seed;

namespace {

constexpr const char* kForward = "native_batch_norm";
constexpr const char* kBackward = "native_batch_norm_backward";


using Tensors3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using Opt = c10::optional<at::Tensor>;

Opt opt(const at::Tensor& t) { return t.defined() ? Opt(t) : Opt(c10::nullopt); }

// native_batch_norm through the dispatcher (the plugin's kernel while the gate is open) or
// straight to LibTorch's, below autograd as the dispatcher calls it.
Tensors3 forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const at::Tensor& rm,
                 const at::Tensor& rv, bool training, double momentum, double eps, bool libtorch) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  if (libtorch) return at::cpu::native_batch_norm(x, opt(w), opt(b), opt(rm), opt(rv), training, momentum, eps);
  return at::native_batch_norm(x, opt(w), opt(b), opt(rm), opt(rv), training, momentum, eps);
}

Tensors3 backward(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor& rm,
                  const at::Tensor& rv, const at::Tensor& mean, const at::Tensor& invstd, bool train, double eps,
                  std::array<bool, 3> mask, bool libtorch) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  if (libtorch)
    return at::cpu::native_batch_norm_backward(g, x, opt(w), opt(rm), opt(rv), opt(mean), opt(invstd), train, eps,
                                               mask);
  return at::native_batch_norm_backward(g, x, opt(w), opt(rm), opt(rv), opt(mean), opt(invstd), train, eps, mask);
}

// The largest error against fp64, relative to the largest of `magnitude` (the fp64 value's, or
// the terms it is the sum of, where they cancel).
double error(const at::Tensor& got, const at::Tensor& want, const at::Tensor& magnitude) {
  const double scale = magnitude.abs().max().item<double>();
  return (got.to(at::kDouble) - want).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
}
double error(const at::Tensor& got, const at::Tensor& want) { return error(got, want, want); }

// As close to fp64 as LibTorch's (or within fp32's rounding), with LibTorch's shape, dtype and
// layout: got against ref_got, LibTorch's against ref_lib (each from the inputs it was given).
void check_close_each(const at::Tensor& got, const at::Tensor& lib, const at::Tensor& ref_got, const at::Tensor& ref_lib,
                      const std::string& what, const at::Tensor& magnitude) {
  CAPTURE(what);
  REQUIRE(got.defined() == lib.defined());
  if (!got.defined()) return;
  REQUIRE(got.sizes() == lib.sizes());
  CHECK((got.scalar_type() == lib.scalar_type()));
  CHECK(got.strides() == lib.strides());
  const at::Tensor& m = magnitude.defined() ? magnitude : ref_got;
  const double e = error(got, ref_got, m), e_lib = error(lib, ref_lib, m);
  CAPTURE(e);
  CAPTURE(e_lib);
  CHECK(e <= 4 * e_lib + 2e-6);
}

void check_close(const at::Tensor& got, const at::Tensor& lib, const at::Tensor& ref, const std::string& what,
                 const at::Tensor& magnitude = at::Tensor()) {
  check_close_each(got, lib, ref, ref, what, magnitude);
}

// Batch normalisation in fp64, as the definition reads: per channel over every dimension but 1.
struct Reference {
  at::Tensor out, mean, invstd, var_unbiased;
  // The size of the terms each is the sum of, where they cancel: the mean of values either side
  // of 0, an output whose bias is about -weight.
  at::Tensor out_terms, mean_terms;
};

std::vector<int64_t> reduced_dims(const at::Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector (fp64) shaped to broadcast over x: [1, C, 1, ...].
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = x.size(1);
  return v.to(at::kDouble).view(shape);
}

Reference reference(const at::Tensor& x32, const at::Tensor& w32, const at::Tensor& b32, double eps) {
  const at::Tensor x = x32.to(at::kDouble);
  const auto dims = reduced_dims(x);
  const double M = static_cast<double>(x.numel() / x.size(1));
  const at::Tensor w = w32.defined() ? per_channel(w32, x) : per_channel(at::ones({x.size(1)}), x);
  const at::Tensor b = b32.defined() ? per_channel(b32, x) : at::zeros_like(w);
  Reference r;
  const at::Tensor mean = x.mean(dims, true);
  const at::Tensor xm = x - mean;
  const at::Tensor var = (xm * xm).mean(dims, true);
  const at::Tensor invstd = (var + eps).rsqrt();
  r.out = xm * invstd * w + b;
  r.out_terms = (xm * invstd * w).abs() + b.abs();
  r.mean_terms = x.abs().mean(dims, true).flatten();
  r.mean = mean.flatten();
  r.invstd = invstd.flatten();
  r.var_unbiased = (var * (M / (M - 1))).flatten();
  return r;
}

// The backward in fp64 from the statistics a forward saved (fp32, as the backward receives them):
// each backward is held to its own inputs. Against the exact mean instead, a gradient whose sums
// cancel would read the rounding of save_mean times sum(dy) as its error - LibTorch's too, by an
// amount that changes with the last bit of the mean each forward rounded.
struct GradReference {
  at::Tensor grad_input, grad_weight, grad_bias;
  // The size of the terms each is the sum of: grad_input's three (with two values a channel, they
  // cancel to nothing), dy * (x - mean) and dy.
  at::Tensor grad_input_terms, grad_weight_terms, grad_bias_terms;
};

GradReference grad_reference(const at::Tensor& x32, const at::Tensor& w32, const at::Tensor& g32,
                             const at::Tensor& save_mean, const at::Tensor& save_invstd) {
  const at::Tensor x = x32.to(at::kDouble), g = g32.to(at::kDouble);
  const auto dims = reduced_dims(x);
  const double M = static_cast<double>(x.numel() / x.size(1));
  const at::Tensor mean = per_channel(save_mean, x), invstd = per_channel(save_invstd, x);
  const at::Tensor w = w32.defined() ? per_channel(w32, x) : at::ones_like(mean);
  const at::Tensor xm = x - mean;
  const at::Tensor sum_g = g.sum(dims, true), dot = (g * xm).sum(dims, true);
  GradReference r;
  r.grad_input = (g - sum_g / M - xm * invstd * invstd * dot / M) * invstd * w;
  r.grad_input_terms = (g.abs() + sum_g.abs() / M + (xm * invstd * invstd * dot).abs() / M) * invstd * w.abs();
  r.grad_weight = (dot * invstd).flatten();
  r.grad_bias = sum_g.flatten();
  r.grad_weight_terms = ((g * xm).abs().sum(dims, true) * invstd).flatten();
  r.grad_bias_terms = g.abs().sum(dims, true).flatten();
  return r;
}

struct Case {
  std::vector<int64_t> shape;
  int layout = 0;  // 0: contiguous, 1: channels-last (4-d and 5-d)
  bool weight = true, bias = true, running = true;
  std::string label() const {
    std::string s = "input " + std::to_string(shape[0]);
    for (size_t i = 1; i < shape.size(); ++i) s += "x" + std::to_string(shape[i]);
    return s + (layout == 1 ? " channels-last" : " contiguous") + (weight ? " weight" : "") + (bias ? " bias" : "") +
           (running ? " running stats" : "");
  }
  // Whether x lies in rows of C channels (channels-last, or one element a channel and sample);
  // a contiguous tensor of more lies in planes, channels-last or not (one channel).
  static bool rows(const at::Tensor& x) {
    return !x.is_contiguous() || x.numel() == x.size(0) * x.size(1);
  }
};

at::Tensor layout(const at::Tensor& t, int layout) {
  if (layout == 1)
    return t.contiguous(t.dim() == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d);
  return t.contiguous();
}

Case random_case(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Case c;
  const int dims = pick(2, 5);
  // Channel counts of the vector loops (multiples of 8, up to 72) and others.
  const int64_t C = pick(0, 1) == 0 ? 8 * pick(1, 9) : pick(1, 40);
  c.shape = {pick(1, 9), C};
  for (int d = 2; d < dims; ++d) c.shape.push_back(pick(1, 9));
  int64_t per_channel = c.shape[0];
  for (size_t d = 2; d < c.shape.size(); ++d) per_channel *= c.shape[d];
  if (per_channel < 2) c.shape[0] = 2;  // two values a channel at least (the third case has one)
  c.layout = dims >= 4 && pick(0, 2) != 0 ? 1 : 0;
  c.weight = pick(0, 3) != 0;
  c.bias = pick(0, 3) != 0;
  c.running = pick(0, 3) != 0;
  return c;
}

}  // namespace

TEST_CASE("batch_norm kernels: the plugin's training step against LibTorch's kernel and fp64, forward and backward") {
  auto rt = test::start_cpu_runtime();
  const test::Fp32Thread fp32;
  if (!test::plan_lists_kernel(*rt, kForward)) {
    MESSAGE("skipped: the plan lists no plugin batch_norm (a CPU without AVX2, said by operator_kernels_test)");
    return;
  }
  std::mt19937 rng(test_seed());
  at::manual_seed(test_seed());
  std::uint64_t forward_calls = test::required_kernel_calls(*rt, kForward), backward_calls = test::required_kernel_calls(*rt, kBackward);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 200; ++i) {
    const Case c = random_case(rng);
    INFO(c.label());
    const int64_t C = c.shape[1];
    // Inputs far from zero now and then (mean 100, spread 0.5): the variance is not lost to it.
    // Each channel its own mean too.
    const double offset = i % 3 == 0 ? 100.0 : 0.0, spread = i % 3 == 0 ? 0.5 : 2.0;
    std::vector<int64_t> per_channel(c.shape.size(), 1);
    per_channel[1] = C;
    const at::Tensor x =
        layout(at::randn(c.shape) * spread + offset + at::randn(per_channel), c.layout);
    const at::Tensor w = c.weight ? at::randn({C}) : at::Tensor();
    const at::Tensor b = c.bias ? at::randn({C}) : at::Tensor();
    const at::Tensor rm0 = at::randn({C}), rv0 = at::rand({C}) + 0.5;
    const at::Tensor rm = c.running ? rm0.clone() : at::Tensor(), rv = c.running ? rv0.clone() : at::Tensor();
    const at::Tensor rm_lib = c.running ? rm0.clone() : at::Tensor(), rv_lib = c.running ? rv0.clone() : at::Tensor();
    const double momentum = 0.05 + 0.5 * unit(rng), eps = i % 2 == 0 ? 1e-5 : 1e-3;
    const auto lib = forward(x, w, b, rm_lib, rv_lib, true, momentum, eps, true);
    const auto got = forward(x, w, b, rm, rv, true, momentum, eps, false);
    CHECK(test::required_kernel_calls(*rt, kForward) == ++forward_calls);
    const at::Tensor g = at::randn(c.shape).contiguous(x.suggest_memory_format());
    REQUIRE(g.strides() == x.strides());
    const Reference ref = reference(x, w, b, eps);
    check_close(std::get<0>(got), std::get<0>(lib), ref.out, "output", ref.out_terms);
    check_close(std::get<1>(got), std::get<1>(lib), ref.mean, "save_mean", ref.mean_terms);
    check_close(std::get<2>(got), std::get<2>(lib), ref.invstd, "save_invstd");
    if (c.running) {
      check_close(rm, rm_lib, (1 - momentum) * rm0.to(at::kDouble) + momentum * ref.mean, "running_mean",
                  (1 - momentum) * rm0.to(at::kDouble).abs() + momentum * ref.mean_terms);
      check_close(rv, rv_lib, (1 - momentum) * rv0.to(at::kDouble) + momentum * ref.var_unbiased, "running_var");
    }
    const std::array<bool, 3> mask{i % 4 != 1, i % 4 != 2 && c.weight, i % 4 != 3 && c.bias};
    CAPTURE(mask[0]);
    const auto lib_grads =
        backward(g, x, w, rm_lib, rv_lib, std::get<1>(lib), std::get<2>(lib), true, eps, mask, true);
    const auto got_grads = backward(g, x, w, rm, rv, std::get<1>(got), std::get<2>(got), true, eps, mask, false);
    // NCHW planes: LibTorch's backward (it already reads them at memory speed).
    if (Case::rows(x)) ++backward_calls;
    CHECK(test::required_kernel_calls(*rt, kBackward) == backward_calls);
    const GradReference ref_got = grad_reference(x, w, g, std::get<1>(got), std::get<2>(got));
    const GradReference ref_lib = grad_reference(x, w, g, std::get<1>(lib), std::get<2>(lib));
    if (mask[0])
      check_close_each(std::get<0>(got_grads), std::get<0>(lib_grads), ref_got.grad_input, ref_lib.grad_input,
                       "grad_input", ref_got.grad_input_terms);
    if (mask[1])
      check_close_each(std::get<1>(got_grads), std::get<1>(lib_grads), ref_got.grad_weight, ref_lib.grad_weight,
                       "grad_weight", ref_got.grad_weight_terms);
    if (mask[2])
      check_close_each(std::get<2>(got_grads), std::get<2>(lib_grads), ref_got.grad_bias, ref_lib.grad_bias,
                       "grad_bias", ref_got.grad_bias_terms);
  }
}

TEST_CASE("batch_norm kernels: the same bits at one thread and at two") {
  auto rt = test::start_cpu_runtime();
  const test::Fp32Thread fp32;
  if (!test::plan_lists_kernel(*rt, kForward)) return;  // said in the first case
  at::manual_seed(test_seed());
  const int threads = at::get_num_threads();
  for (const auto& [shape, cl] : std::vector<std::pair<std::vector<int64_t>, int>>{
           {{16, 16, 24, 24}, 1}, {{8, 40, 12, 12}, 1}, {{16, 12, 20, 20}, 0}, {{512, 24}, 0}}) {
    const Case c{shape, cl};
    INFO(c.label());
    const at::Tensor x = layout(at::randn(shape), cl), g = layout(at::randn(shape), cl);
    const at::Tensor w = at::randn({shape[1]}), b = at::randn({shape[1]});
    auto run = [&](int n) {
      at::set_num_threads(n);
      const auto f = forward(x, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, false);
      const auto d = backward(g, x, w, at::Tensor(), at::Tensor(), std::get<1>(f), std::get<2>(f), true, 1e-5,
                              {true, true, true}, false);
      return std::vector<at::Tensor>{std::get<0>(f), std::get<1>(f), std::get<2>(f), std::get<0>(d), std::get<1>(d),
                                     std::get<2>(d)};
    };
    const auto one = run(1), two = run(2);
    at::set_num_threads(threads);
    for (size_t i = 0; i < one.size(); ++i) {
      INFO("result " << i);
      CHECK(at::equal(one[i], two[i]));
    }
  }
}

TEST_CASE("batch_norm kernels: a NaN or an infinity in a channel gives what LibTorch's gives, in that channel only") {
  auto rt = test::start_cpu_runtime();
  const test::Fp32Thread fp32;
  if (!test::plan_lists_kernel(*rt, kForward)) return;  // said in the first case
  at::manual_seed(test_seed());
  for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    for (const int cl : {0, 1}) {
      INFO("value " << bad << (cl ? " channels-last" : " NCHW"));
      at::Tensor x = at::randn({4, 16, 6, 6});
      x[2][5][3][1] = bad;
      x = layout(x, cl);
      const at::Tensor w = at::randn({16}), b = at::randn({16});
      const auto got = forward(x, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, false);
      const auto lib = forward(x, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, true);
      for (const auto& [g, l] : {std::pair{std::get<0>(got), std::get<0>(lib)}, std::pair{std::get<1>(got), std::get<1>(lib)},
                                 std::pair{std::get<2>(got), std::get<2>(lib)}}) {
        CHECK(at::equal(g.isfinite(), l.isfinite()));
        CHECK(at::allclose(g, l, 1e-4, 1e-4, /*equal_nan=*/true));
      }
      CHECK(std::get<0>(got).select(1, 5).isfinite().any().item<bool>() == false);
      CHECK(std::get<0>(got).select(1, 4).isfinite().all().item<bool>());
    }
  }
}

TEST_CASE("batch_norm kernels: eval mode, other dtypes and strides, one value a channel and a shut gate stay LibTorch's") {
  auto rt = test::start_cpu_runtime();
  const test::Fp32Thread fp32;
  if (!test::plan_lists_kernel(*rt, kForward)) return;  // said in the first case
  at::manual_seed(test_seed());
  const std::uint64_t forward_calls = test::required_kernel_calls(*rt, kForward), backward_calls = test::required_kernel_calls(*rt, kBackward);
  auto same = [](const Tensors3& a, const Tensors3& b) {
    CHECK(at::equal(std::get<0>(a), std::get<0>(b)));
    CHECK(at::equal(std::get<1>(a), std::get<1>(b)));
    CHECK(at::equal(std::get<2>(a), std::get<2>(b)));
  };
  const at::Tensor w = at::randn({6}), b = at::randn({6}), rm = at::randn({6}), rv = at::rand({6}) + 0.5;
  const at::Tensor x = at::randn({4, 6, 5, 5}).contiguous(at::MemoryFormat::ChannelsLast);
  {
    INFO("eval mode: the running statistics normalise");
    same(forward(x, w, b, rm, rv, false, 0.1, 1e-5, false), forward(x, w, b, rm, rv, false, 0.1, 1e-5, true));
    const at::Tensor g = at::randn_like(x);
    same(backward(g, x, w, rm, rv, at::Tensor(), at::Tensor(), false, 1e-5, {true, true, true}, false),
         backward(g, x, w, rm, rv, at::Tensor(), at::Tensor(), false, 1e-5, {true, true, true}, true));
  }
  {
    INFO("fp64; fp32 with fp64 weights gets LibTorch's error");
    const at::Tensor xd = x.to(at::kDouble);
    same(forward(xd, w.to(at::kDouble), b.to(at::kDouble), at::Tensor(), at::Tensor(), true, 0.1, 1e-5, false),
         forward(xd, w.to(at::kDouble), b.to(at::kDouble), at::Tensor(), at::Tensor(), true, 0.1, 1e-5, true));
    CHECK_THROWS(forward(x, w.to(at::kDouble), b.to(at::kDouble), at::Tensor(), at::Tensor(), true, 0.1, 1e-5, true));
    CHECK_THROWS(forward(x, w.to(at::kDouble), b.to(at::kDouble), at::Tensor(), at::Tensor(), true, 0.1, 1e-5, false));
  }
  {
    INFO("an input neither contiguous nor channels-last (a transposed view)");
    const at::Tensor t = at::randn({4, 6, 5, 7}).transpose(2, 3);
    same(forward(t, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, false),
         forward(t, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, true));
  }
  {
    INFO("one value a channel: LibTorch's kernel, its result or its error");
    const at::Tensor one = at::randn({1, 6});
    bool lib_threw = false;
    Tensors3 lib;
    try {
      lib = forward(one, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, true);
    } catch (const std::exception&) {
      lib_threw = true;
    }
    if (lib_threw) {
      CHECK_THROWS(forward(one, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, false));
    } else {
      const auto got = forward(one, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, false);
      CHECK(at::allclose(std::get<0>(got), std::get<0>(lib), 0, 0, /*equal_nan=*/true));
    }
  }
  CHECK(test::required_kernel_calls(*rt, kForward) == forward_calls);
  CHECK(test::required_kernel_calls(*rt, kBackward) == backward_calls);
  {
    INFO("a gradient of other strides than the input's (an expanded one, as sum() gives)");
    const auto f = forward(x, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, false);
    CHECK(test::required_kernel_calls(*rt, kForward) == forward_calls + 1);
    const at::Tensor g = at::ones({1}).expand(x.sizes());
    same(backward(g, x, w, at::Tensor(), at::Tensor(), std::get<1>(f), std::get<2>(f), true, 1e-5, {true, true, true},
                  false),
         backward(g, x, w, at::Tensor(), at::Tensor(), std::get<1>(f), std::get<2>(f), true, 1e-5, {true, true, true},
                  true));
    CHECK(test::required_kernel_calls(*rt, kBackward) == backward_calls);
  }
  // A plain plan on this thread shuts the gate: LibTorch's kernel.
  rt->apply_precision(PrecisionPlan{});
  same(forward(x, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, false),
       forward(x, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, true));
  CHECK(test::required_kernel_calls(*rt, kForward) == forward_calls + 1);
  rt->apply_precision(rt->precision());
  (void)forward(x, w, b, at::Tensor(), at::Tensor(), true, 0.1, 1e-5, false);
  CHECK(test::required_kernel_calls(*rt, kForward) == forward_calls + 2);
}

TEST_CASE("batch_norm kernels: a BatchNorm2d between convolutions through autograd, as a training step reaches it") {
  auto rt = test::start_cpu_runtime();
  const test::Fp32Thread fp32;
  if (!test::plan_lists_kernel(*rt, kForward)) return;  // said in the first case
  at::manual_seed(test_seed());
  for (const bool cl : {true, false}) {
    INFO((cl ? "channels-last" : "NCHW"));
    torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 16, 3).padding(1));
    torch::nn::BatchNorm2d bn(16);
    const at::Tensor image = at::randn({8, 3, 12, 12});
    // One step: the loss and the gradients of the convolution's weight and the norm's two.
    auto step = [&](at::ScalarType dtype) {
      const test::Fp32Thread fp32_step;  // an fp32 step, whatever apply_precision set on the thread
      conv->to(dtype);
      bn->to(dtype);
      conv->zero_grad();
      bn->zero_grad();
      at::Tensor x = image.to(dtype);
      if (cl) {
        x = x.contiguous(at::MemoryFormat::ChannelsLast);
        conv->weight.set_data(conv->weight.contiguous(at::MemoryFormat::ChannelsLast));
      }
      const at::Tensor loss = (torch::relu(bn(conv(x))) * at::linspace(0, 1, 12 * 12, dtype).view({12, 12})).sum();
      loss.backward();
      return std::vector<at::Tensor>{loss.to(at::kDouble).reshape({1}), conv->weight.grad().to(at::kDouble),
                                     bn->weight.grad().to(at::kDouble), bn->bias.grad().to(at::kDouble)};
    };
    const std::uint64_t calls = test::required_kernel_calls(*rt, kForward), backward_calls = test::required_kernel_calls(*rt, kBackward);
    const auto got = step(at::kFloat);
    CHECK(test::required_kernel_calls(*rt, kForward) == calls + 1);
    CHECK(test::required_kernel_calls(*rt, kBackward) == backward_calls + (cl ? 1 : 0));
    const auto ref = step(at::kDouble);  // fp64: LibTorch's kernels
    rt->apply_precision(PrecisionPlan{});
    const auto lib = step(at::kFloat);  // the gate shut: LibTorch's kernels
    rt->apply_precision(rt->precision());
    CHECK(test::required_kernel_calls(*rt, kForward) == calls + 1);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("result " << i);
      const double e = error(got[i], ref[i]), e_lib = error(lib[i], ref[i]);
      CAPTURE(e);
      CAPTURE(e_lib);
      CHECK(e <= 4 * e_lib + 2e-6);
    }
  }
}

}  // namespace batch_norm_kernel_suite
