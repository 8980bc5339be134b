// The plugin's operator kernels (sdk precision.hpp, OperatorKernel) through a Runtime on the
// built CPU plugin: the plan that lists them, the setting that turns them off, the gate that
// keeps plain LibTorch plain, and max_pool2d_with_indices and its backward against LibTorch's
// own CPU kernels
// (at::cpu::, which the dispatcher cannot send to the plugin) on fresh random inputs - values and
// indices exactly equal, forward and backward, NaN, -inf and ties included. Inputs the plugin's
// loop does not take go to LibTorch's kernel: its call counter (read back) shows which ran.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/ops/convolution_backward_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/max_pool2d_with_indices_backward_cpu_dispatch.h>
#include <ATen/ops/max_pool2d_with_indices_cpu_dispatch.h>

#include "torch_doctest.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "accelkit/runtime.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "accelkit/sdk/device.hpp"
#include "accelkit/step_tuning.hpp"
#include "cpu_runtime.hpp"
#include "operator_kernels.hpp"
#include "test_support.hpp"

namespace operator_kernels_suite {

using namespace accelkit;
using accelkit::test::ScopedEnv;
using accelkit::test::test_seed;

namespace {

constexpr const char* kOp = "max_pool2d_with_indices";
constexpr const char* kBackward = "max_pool2d_with_indices_backward";
constexpr const char* kConv = "convolution_backward";

// The plugin's own count of the calls its kernel ran (CpuPrecision::read_back).
std::uint64_t plugin_calls(const Runtime& rt, const std::string& op = kOp) {
  const auto calls = test::kernel_calls(rt, op);
  REQUIRE_MESSAGE(calls.has_value(), "the CPU plugin reads back no kernel_calls." << op);
  return *calls;
}

bool lists_max_pool(const Runtime& rt) {
  for (const auto& k : rt.precision().kernels)
    if (k == kOp) return true;
  return false;
}

// Equal as LibTorch's kernel returns them: the same NaNs, every other value and every index
// exactly.
void check_same(const std::tuple<at::Tensor, at::Tensor>& got, const std::tuple<at::Tensor, at::Tensor>& want) {
  const at::Tensor& v = std::get<0>(got);
  const at::Tensor& w = std::get<0>(want);
  REQUIRE(v.sizes() == w.sizes());
  CHECK((v.scalar_type() == w.scalar_type()));
  CHECK(at::equal(v.isnan(), w.isnan()));
  CHECK(at::equal(v.nan_to_num(0.0), w.nan_to_num(0.0)));
  CHECK(at::equal(std::get<1>(got), std::get<1>(want)));
  CHECK((std::get<1>(got).scalar_type() == at::kLong));
}

// Random input with what breaks a careless max: ties (small integers), NaNs, -inf, +inf.
at::Tensor nasty(at::IntArrayRef shape, bool ties) {
  at::Tensor x = ties ? at::randint(-2, 3, shape).to(at::kFloat) : at::randn(shape);
  const int64_t n = x.numel();
  auto flat = x.view({-1});
  for (int64_t i = 0; i < n; i += 7) flat[i] = -std::numeric_limits<float>::infinity();
  for (int64_t i = 3; i < n; i += 29) flat[i] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 5; i < n; i += 31) flat[i] = std::numeric_limits<float>::infinity();
  return x;
}

}  // namespace

TEST_CASE("operator kernels: the plan lists the plugin's max_pool2d where the CPU has AVX2; kernels = off lists none") {
  auto rt = test::start_cpu_runtime();
  if (!lists_max_pool(*rt)) {
    // A CPU without AVX2: the plan says why, and nothing is registered.
    bool said = false;
    for (const auto& r : rt->precision().reasons) said = said || r.find("need AVX2") != std::string::npos;
    CHECK(said);
    CHECK(rt->operator_kernels().empty());
    MESSAGE("skipped the kernel checks: this CPU has no AVX2, so the plan lists none of the plugin's kernels");
    return;
  }
  REQUIRE(rt->operator_kernels().size() == 7);
  CHECK(rt->operator_kernels()[0].rfind(std::string(kOp) + ": 2x2", 0) == 0);
  CHECK(rt->operator_kernels()[1].rfind(std::string(kBackward) + ": ", 0) == 0);
  CHECK(rt->operator_kernels()[2].rfind("convolution: ", 0) == 0);
  CHECK(rt->operator_kernels()[3].rfind(std::string(kConv) + ": ", 0) == 0);
  CHECK(rt->operator_kernels()[4].rfind("native_batch_norm: training-mode", 0) == 0);
  CHECK(rt->operator_kernels()[5].rfind("native_batch_norm_backward: ", 0) == 0);
  CHECK(rt->operator_kernels()[6].rfind("bernoulli_.float: dropout's masks", 0) == 0);

  auto off = test::start_cpu_runtime({{"kernels", "off"}});
  CHECK(off->precision().kernels.empty());
  CHECK(off->operator_kernels().empty());
  bool said = false;
  for (const auto& r : off->precision().reasons) said = said || r.find("kernels = off") != std::string::npos;
  CHECK(said);
  {
    ScopedEnv env("ACCELKIT_KERNELS", "off");
    ContextOptions o;
    o.settings.cli = {{"device", "cpu"}};
    o.loader.cli_paths = {ACCELKIT_TEST_PLUGIN_DIR};
    o.loader.read_environment = false;
    o.loader.include_default_dirs = false;
    auto from_env = Runtime::start(o);
    CHECK(from_env->precision().kernels.empty());
  }
}

TEST_CASE("operator kernels: the CPU plugin's plan without AVX2 - automatic lists none, on is refused") {
  cpu::IsaFlags none;
  std::string why;
  auto automatic = cpu::plan_operator_kernels(Toggle::automatic, none, why);
  REQUIRE(automatic.ok());
  CHECK(automatic.value().empty());
  CHECK(why.find("need AVX2") != std::string::npos);
  auto on = cpu::plan_operator_kernels(Toggle::on, none, why);
  CHECK_FALSE(on.ok());
  CHECK((on.status().code() == StatusCode::not_supported));
  cpu::IsaFlags avx2;
  avx2.avx2 = true;
  auto with = cpu::plan_operator_kernels(Toggle::automatic, avx2, why);
  REQUIRE(with.ok());
#if defined(__x86_64__)
  CHECK(with.value() ==
        std::vector<std::string>{kOp, kBackward, "convolution", kConv, "native_batch_norm", "native_batch_norm_backward",
                                 "bernoulli_.float"});
  // The reason names the one-channel weight gradient's loop exactly where it runs: FMA, no AVX-512.
  CHECK((why.find("one-input-channel") != std::string::npos) ==
        (__builtin_cpu_supports("fma") != 0 && __builtin_cpu_supports("avx512f") == 0));
#endif
  CHECK(why.find("max_pool2d_with_indices") != std::string::npos);
  CHECK(why.find("convolution_backward") != std::string::npos);
  CHECK(why.find("native_batch_norm and its backward") != std::string::npos);
  CHECK(why.find("bernoulli_ with a scalar p (dropout's masks)") != std::string::npos);
  auto off = cpu::plan_operator_kernels(Toggle::off, avx2, why);
  REQUIRE(off.ok());
  CHECK(off.value().empty());
}

TEST_CASE("operator kernels: max_pool2d_with_indices equals LibTorch's kernel on random inputs, forward and backward") {
  auto rt = test::start_cpu_runtime();
  if (!lists_max_pool(*rt)) return;  // said in the first case
  at::manual_seed(test_seed());
  const std::vector<std::vector<int64_t>> shapes{
      {64, 10, 24, 24},  // pytorch/examples' MNIST network, first pooling
      {64, 20, 8, 8},    // and its second
      {3, 5, 7, 9},      // odd: the last row and column belong to no window
      {1, 1, 2, 2},      {2, 3, 2, 41}, {8, 16, 64, 64},  // one window; one row; several threads' worth
      {2, 3, 6, 14},     {2, 2, 5, 10}, {1, 2, 4, 13},    // rows ending in 3, 1 and 2 of the loop's 4 windows
      {4, 8, 15, 15},                                     // DCGAN-like odd planes: 7 windows a row
  };
  const std::vector<int64_t> k2{2, 2};
  std::uint64_t calls = plugin_calls(*rt);
  std::uint64_t backward_calls = plugin_calls(*rt, kBackward);
  for (const auto& shape : shapes)
    for (bool ties : {false, true}) {
      INFO("shape " << at::IntArrayRef(shape) << (ties ? " with ties" : ""));
      const at::Tensor x = nasty(shape, ties);
      const auto want = at::cpu::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false);
      check_same(at::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false), want);
      CHECK(plugin_calls(*rt) == ++calls);
      // The gradient: bit for bit LibTorch's (its +0.0 where a -0.0 arrives, too).
      at::Tensor g = at::randn(std::get<0>(want).sizes());
      g.view({-1}).slice(0, 0, g.numel(), 5).fill_(-0.0);
      const at::Tensor& idx = std::get<1>(want);
      const at::Tensor gi = at::max_pool2d_with_indices_backward(g, x, k2, k2, {0, 0}, {1, 1}, false, idx);
      const at::Tensor gi_want = at::cpu::max_pool2d_with_indices_backward(g, x, k2, k2, {0, 0}, {1, 1}, false, idx);
      CHECK(at::equal(gi, gi_want));
      CHECK(at::equal(gi.signbit(), gi_want.signbit()));
      CHECK(plugin_calls(*rt, kBackward) == ++backward_calls);
      // The forms a program writes: one number for both sides, the stride left out.
      check_same(at::max_pool2d_with_indices(x, {2}, {}, {0}, {1}, false), want);
      CHECK(plugin_calls(*rt) == ++calls);
      // ceil_mode where no window would hang over the edge.
      if (shape[2] % 2 == 0 && shape[3] % 2 == 0) {
        check_same(at::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, true), want);
        CHECK(plugin_calls(*rt) == ++calls);
      }
    }

  // at::max_pool2d (what torch::nn::MaxPool2d and torch::max_pool2d call) with autograd: the
  // gradient goes where LibTorch's indices say.
  const at::Tensor x = at::randn({16, 6, 12, 10});
  const at::Tensor g = at::randn({16, 6, 6, 5});
  const at::Tensor a = x.clone().requires_grad_(true);
  const at::Tensor out = at::max_pool2d(a, {2, 2});
  INFO("grad mode " << at::GradMode::is_enabled() << ", input requires grad " << a.requires_grad());
  REQUIRE(out.requires_grad());
  CHECK(plugin_calls(*rt) == ++calls);
  out.backward(g);
  CHECK(plugin_calls(*rt, kBackward) == ++backward_calls);
  // (at::cpu:: has no autograd: the reference gradient is g scattered to LibTorch's indices.)
  const auto want = at::cpu::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false);
  const at::Tensor grad = at::zeros_like(x).flatten(2).scatter_add_(2, std::get<1>(want).flatten(2), g.flatten(2));
  CHECK(at::equal(out.detach(), std::get<0>(want)));
  CHECK(at::equal(a.grad(), grad.view_as(x)));
}

TEST_CASE("operator kernels: inputs the plugin's loop does not take, and a shut gate, run LibTorch's kernel") {
  auto rt = test::start_cpu_runtime();
  if (!lists_max_pool(*rt)) return;  // said in the first case
  at::manual_seed(test_seed());
  const at::Tensor x = at::randn({4, 6, 14, 14});
  const std::uint64_t calls = plugin_calls(*rt);
  struct Case {
    const char* what;
    at::Tensor input;
    std::vector<int64_t> kernel, stride, padding, dilation;
    bool ceil_mode;
  };
  const std::vector<Case> cases{
      {"3x3 windows", x, {3, 3}, {2, 2}, {0, 0}, {1, 1}, false},
      {"stride 1", x, {2, 2}, {1, 1}, {0, 0}, {1, 1}, false},
      {"padding", x, {2, 2}, {2, 2}, {1, 1}, {1, 1}, false},
      {"dilation", x, {2, 2}, {2, 2}, {0, 0}, {2, 2}, false},
      {"ceil_mode over an odd plane", at::randn({2, 3, 7, 7}), {2, 2}, {2, 2}, {0, 0}, {1, 1}, true},
      {"channels-last", x.contiguous(at::MemoryFormat::ChannelsLast), {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {"a strided view", at::randn({4, 6, 14, 28}).slice(3, 0, 28, 2), {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {"3-d (no batch)", at::randn({6, 14, 14}), {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {"bf16", x.to(at::kBFloat16), {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {"fp64", x.to(at::kDouble), {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    check_same(at::max_pool2d_with_indices(c.input, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode),
               at::cpu::max_pool2d_with_indices(c.input, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode));
  }
  CHECK(plugin_calls(*rt) == calls);

  // Indices that do not name an element of their own window (any element of the plane is
  // LibTorch's contract): LibTorch's kernel adds them where they point.
  const std::uint64_t backward_calls = plugin_calls(*rt, kBackward);
  const at::Tensor g = at::randn({4, 6, 7, 7});
  const at::Tensor stray = at::randint(0, 14 * 14, {4, 6, 7, 7}, at::kLong);
  const std::vector<int64_t> two{2, 2};
  CHECK(at::equal(at::max_pool2d_with_indices_backward(g, x, two, two, {0, 0}, {1, 1}, false, stray),
                  at::cpu::max_pool2d_with_indices_backward(g, x, two, two, {0, 0}, {1, 1}, false, stray)));
  // A gradient that is not contiguous.
  const at::Tensor idx = std::get<1>(at::cpu::max_pool2d_with_indices(x, two, two, {0, 0}, {1, 1}, false));
  const at::Tensor gt = at::randn({4, 6, 7, 7}).transpose(2, 3);
  CHECK(at::equal(at::max_pool2d_with_indices_backward(gt, x, two, two, {0, 0}, {1, 1}, false, idx),
                  at::cpu::max_pool2d_with_indices_backward(gt, x, two, two, {0, 0}, {1, 1}, false, idx)));
  CHECK(plugin_calls(*rt, kBackward) == backward_calls);

  // A plain plan on this thread shuts the gate: LibTorch's kernel, the same result.
  rt->apply_precision(PrecisionPlan{});
  const std::vector<int64_t> k2{2, 2};
  check_same(at::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false),
             at::cpu::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false));
  CHECK(plugin_calls(*rt) == calls);
  // Another thread never had a plan applied: shut there too.
  rt->apply_precision(rt->precision());
  std::thread([&] { (void)at::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false); }).join();
  CHECK(plugin_calls(*rt) == calls);
  (void)at::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false);
  CHECK(plugin_calls(*rt) == calls + 1);
}

namespace {

// LibTorch's convolution_backward for what the plugin's kernel takes (the input is the data: no
// gradient for it), through the dispatcher (the plugin's kernel while the gate is open) or
// straight to LibTorch's.
std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_backward(const at::Tensor& g, const at::Tensor& x,
                                                             const at::Tensor& w, bool bias, bool libtorch,
                                                             std::vector<int64_t> stride = {1, 1},
                                                             std::vector<int64_t> padding = {0, 0},
                                                             bool input_grad = false) {
  const std::vector<int64_t> bias_sizes{w.size(0)};
  const std::array<bool, 3> mask{input_grad, true, bias};
  const std::vector<int64_t> one{1, 1}, zero{0, 0};
  if (libtorch) {
    // As the dispatcher calls it: below autograd (LibTorch 1.13's oneDNN path asserts that).
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return at::compositeexplicitautograd::convolution_backward(g, x, w, bias_sizes, stride, padding, one, false,
                                                               zero, 1, mask);
  }
  return at::convolution_backward(g, x, w, bias_sizes, stride, padding, one, false, zero, 1, mask);
}

// ||got - want|| / ||want||, want in fp64.
double rel_error(const at::Tensor& got, const at::Tensor& want) {
  return (got.to(at::kDouble) - want).norm().item<double>() / want.norm().item<double>();
}

}  // namespace

// Whether the one-channel weight gradient's loop runs here: the plan lists convolution_backward
// and the CPU has the loop's FMA and no AVX-512 (where LibTorch's kernel is the faster).
bool lists_conv(const Runtime& rt) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("fma") || __builtin_cpu_supports("avx512f")) {
    MESSAGE("skipped: the one-channel weight gradient's loop runs on CPUs with FMA and without AVX-512 only");
    return false;
  }
#endif
  for (const auto& k : rt.precision().kernels)
    if (k == kConv) return true;
  return false;
}

TEST_CASE("operator kernels: convolution_backward's one-channel weight gradient against LibTorch's and fp64") {
  auto rt = test::start_cpu_runtime();
  if (!lists_conv(*rt)) return;  // said in the first case (no AVX2), or a CPU without FMA
  at::manual_seed(test_seed());
  struct Shape {
    std::vector<int64_t> input, weight;
  };
  const std::vector<Shape> shapes{
      {{64, 1, 28, 28}, {10, 1, 5, 5}},  // pytorch/examples' MNIST network, first layer
      {{3, 1, 13, 11}, {4, 1, 3, 7}},    // rows shorter than a vector: the scalar tail only
      {{2, 1, 40, 37}, {6, 1, 4, 2}},    // four vectors and a tail of four
      {{5, 1, 9, 17}, {3, 1, 2, 1}},     // a one-wide kernel
      {{1, 1, 5, 5}, {2, 1, 5, 5}},      // one output element
  };
  std::uint64_t calls = plugin_calls(*rt, kConv);
  for (const auto& s : shapes)
    for (bool bias : {true, false}) {
      INFO("input " << at::IntArrayRef(s.input) << ", weight " << at::IntArrayRef(s.weight) << (bias ? ", bias" : ""));
      const at::Tensor x = at::randn(s.input), w = at::randn(s.weight);
      const at::Tensor g = at::randn({s.input[0], s.weight[0], s.input[2] - s.weight[2] + 1, s.input[3] - s.weight[3] + 1});
      const auto got = conv_backward(g, x, w, bias, false);
      CHECK(plugin_calls(*rt, kConv) == ++calls);
      const auto lib = conv_backward(g, x, w, bias, true);
      const auto ref = conv_backward(g.to(at::kDouble), x.to(at::kDouble), w.to(at::kDouble), bias, true);
      CHECK_FALSE(std::get<0>(got).defined());
      REQUIRE(std::get<1>(got).sizes() == w.sizes());
      CHECK((std::get<1>(got).scalar_type() == at::kFloat));
      // Sums of up to 37k products in fp32: LibTorch's own kernel is ~1e-7 from fp64 here.
      const double err_w = rel_error(std::get<1>(got), std::get<1>(ref));
      const double lib_w = rel_error(std::get<1>(lib), std::get<1>(ref));
      CAPTURE(err_w);
      CAPTURE(lib_w);
      CHECK(err_w < 1e-5);
      CHECK(std::get<2>(got).defined() == bias);
      if (bias) {
        REQUIRE(std::get<2>(got).sizes() == std::get<2>(lib).sizes());
        CHECK(rel_error(std::get<2>(got), std::get<2>(ref)) < 1e-5);
      }
    }

  // Every row sums in the same order whatever the thread count: 1 thread and 2 agree bit for bit.
  const int threads = at::get_num_threads();
  const at::Tensor x = at::randn({32, 1, 28, 28}), w = at::randn({10, 1, 5, 5}), g = at::randn({32, 10, 24, 24});
  at::set_num_threads(1);
  const auto one = conv_backward(g, x, w, true, false);
  at::set_num_threads(2);
  const auto two = conv_backward(g, x, w, true, false);
  at::set_num_threads(threads);
  CHECK(at::equal(std::get<1>(one), std::get<1>(two)));
  CHECK(at::equal(std::get<2>(one), std::get<2>(two)));
  calls += 2;

  // Through autograd, as an fp32 training step reaches it: conv2d on data that needs no
  // gradient. (Under the plan's bf16 autocast, on a CPU with native bf16, the convolution runs
  // in bf16, which the kernel does not take: autocast off here.)
  const at::Tensor data = at::randn({16, 1, 28, 28});
  const at::Tensor weight = at::randn({10, 1, 5, 5}).requires_grad_(true);
  const at::Tensor b = at::randn({10}).requires_grad_(true);
  at::Tensor out;
  {
    const test::Fp32Thread fp32;
    out = at::conv2d(data, weight, b);
  }
  const at::Tensor go = at::randn(out.sizes());
  out.backward(go);
  CHECK(plugin_calls(*rt, kConv) == ++calls);
  const auto want = conv_backward(go.to(at::kDouble), data.to(at::kDouble), weight.detach().to(at::kDouble), true, true);
  CHECK(rel_error(weight.grad(), std::get<1>(want)) < 1e-5);
  CHECK(rel_error(b.grad(), std::get<2>(want)) < 1e-5);
}

TEST_CASE("operator kernels: convolution gradients the plugin's loop does not take run LibTorch's kernel") {
  auto rt = test::start_cpu_runtime();
  if (!lists_conv(*rt)) return;  // said in the first case (no AVX2), or a CPU without FMA
  at::manual_seed(test_seed());
  const std::uint64_t calls = plugin_calls(*rt, kConv);
  const at::Tensor x = at::randn({4, 1, 16, 16}), w = at::randn({6, 1, 5, 5}), g = at::randn({4, 6, 12, 12});
  auto same = [](const std::tuple<at::Tensor, at::Tensor, at::Tensor>& a,
                 const std::tuple<at::Tensor, at::Tensor, at::Tensor>& b) {
    CHECK(std::get<0>(a).defined() == std::get<0>(b).defined());
    if (std::get<0>(a).defined()) CHECK(at::equal(std::get<0>(a), std::get<0>(b)));
    CHECK(at::equal(std::get<1>(a), std::get<1>(b)));
    CHECK(at::equal(std::get<2>(a), std::get<2>(b)));
  };
  {
    INFO("the input's gradient wanted too");
    same(conv_backward(g, x, w, true, false, {1, 1}, {0, 0}, true),
         conv_backward(g, x, w, true, true, {1, 1}, {0, 0}, true));
  }
  {
    INFO("three input channels");
    const at::Tensor x3 = at::randn({4, 3, 16, 16}), w3 = at::randn({6, 3, 5, 5});
    same(conv_backward(g, x3, w3, true, false), conv_backward(g, x3, w3, true, true));
  }
  {
    INFO("stride 2");
    const at::Tensor g2 = at::randn({4, 6, 6, 6});
    same(conv_backward(g2, x, w, true, false, {2, 2}), conv_backward(g2, x, w, true, true, {2, 2}));
  }
  {
    INFO("padding 1");
    const at::Tensor gp = at::randn({4, 6, 14, 14});
    same(conv_backward(gp, x, w, true, false, {1, 1}, {1, 1}), conv_backward(gp, x, w, true, true, {1, 1}, {1, 1}));
  }
  {
    INFO("rows of 9 weights");
    const at::Tensor w9 = at::randn({6, 1, 3, 9}), g9 = at::randn({4, 6, 14, 8});
    same(conv_backward(g9, x, w9, true, false), conv_backward(g9, x, w9, true, true));
  }
  {
    INFO("fp64");
    const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble), gd = g.to(at::kDouble);
    same(conv_backward(gd, xd, wd, true, false), conv_backward(gd, xd, wd, true, true));
  }
  {
    INFO("a gradient that is not contiguous");
    const at::Tensor gt = at::randn({4, 6, 12, 12}).transpose(2, 3);
    same(conv_backward(gt, x, w, true, false), conv_backward(gt, x, w, true, true));
  }
  CHECK(plugin_calls(*rt, kConv) == calls);
  // A plain plan on this thread shuts the gate.
  rt->apply_precision(PrecisionPlan{});
  same(conv_backward(g, x, w, true, false), conv_backward(g, x, w, true, true));
  CHECK(plugin_calls(*rt, kConv) == calls);
  rt->apply_precision(rt->precision());
  (void)conv_backward(g, x, w, true, false);
  CHECK(plugin_calls(*rt, kConv) == calls + 1);
}

TEST_CASE("operator kernels: when the runtime ends, LibTorch's kernel is back") {
  std::uint64_t after = 0;
  const at::Tensor x = at::randn({2, 3, 8, 8});
  const std::vector<int64_t> k2{2, 2};
  {
    auto rt = test::start_cpu_runtime();
    if (!lists_max_pool(*rt)) return;  // said in the first case
    (void)at::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false);
    after = plugin_calls(*rt);
  }
  // Its kernel left the dispatcher before the plugin that holds its code was unloaded: a call
  // on this thread (whose gate the runtime left open) runs LibTorch's kernel, not freed code.
  check_same(at::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false),
             at::cpu::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false));
  CHECK(after > 0);
}

TEST_CASE("operator kernels: step tuning measures the plugin's kernels against LibTorch's unless the user fixed them") {
  accelkit::test::TempDir cache("accelkit-operator-kernels");
  ScopedEnv cache_dir("ACCELKIT_CACHE_DIR", cache.path().string());
  const int threads = at::get_num_threads();
  {
    auto rt = test::start_cpu_runtime();
    if (!lists_max_pool(*rt)) return;  // said in the first case
    const StepTuningStatus& st = rt->step_tuning();
    if (st.state != StepTuningStatus::State::off) {
      bool measured = false;
      for (const auto& c : st.candidates) measured = measured || c.kernels == StepKernels::libtorch;
      CHECK(measured);
      CHECK((st.candidates.front().kernels == StepKernels::plugin));
    }
  }
  {
    auto rt = test::start_cpu_runtime({{"kernels", "on"}});
    for (const auto& c : rt->step_tuning().candidates) CHECK((c.kernels == StepKernels::plugin));
  }
  at::set_num_threads(threads);
  StepConfig c{false, at::kFloat, 2, StepKernels::libtorch};
  CHECK(c.label() == "fp32, 2 threads, LibTorch's kernels");
  CHECK_FALSE(c == StepConfig{false, at::kFloat, 2, StepKernels::plugin});
}

}  // namespace operator_kernels_suite
