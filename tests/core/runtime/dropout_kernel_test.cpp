// The CPU plugin's bernoulli_ with a scalar p (plugins/cpu/bernoulli_op.hpp), dropout's mask,
// through a Runtime on the built CPU plugin: every element against an independent reference -
// LibTorch's own Philox engine (at::philox_engine), keyed by the draw the kernel takes from the
// generator, in the kernel's element layout - for each dtype, size and p; the frequency of ones
// and of neighbouring pairs; the same bits at one thread and at two, from the same seed; complex
// numbers, strides with gaps, p outside [0, 1] and a shut gate left to LibTorch's kernel; dropout
// through autograd as a training step reaches it. And each ISA's loop (AVX2, AVX-512) on its
// own, against the plugin's scalar Philox, where the CPU has it.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/PhiloxRNGEngine.h>
#include <torch/torch.h>

#include "torch_doctest.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "accelkit/runtime.hpp"
#include "bernoulli_kernel.hpp"
#include "cpu_runtime.hpp"
#include "test_support.hpp"

namespace dropout_kernel_suite {

using namespace accelkit;
using accelkit::test::test_seed;

namespace {

constexpr const char* kOp = "bernoulli_.float";

// The 64-bit draw the kernel takes first from a generator in the state of `gen`.
uint64_t next_seed(const at::Generator& gen) {
  at::Generator copy = gen.clone();
  return copy.get<at::CPUGeneratorImpl>()->random64();
}

// Element i of the stream keyed by `seed`, by LibTorch's Philox engine: word (i / 8) % 4 of
// the block at counter (i / 32) * 8 + i % 8 (the engine's offset; subsequence 0).
uint32_t reference_number(uint64_t seed, uint64_t i) {
  at::philox_engine engine(seed, 0, (i / 32) * 8 + i % 8);
  uint32_t word = 0;
  for (uint64_t w = 0; w <= (i / 8) % 4; ++w) word = engine();
  return word;
}

// The mask the kernel must give for this seed and p, as fp64 0s and 1s in memory order.
at::Tensor reference_mask(uint64_t seed, int64_t n, double p) {
  const auto threshold = static_cast<uint64_t>(std::floor(p * 4294967296.0));
  at::Tensor m = at::empty({n}, at::kDouble);
  double* d = m.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) d[i] = p == 1.0 || reference_number(seed, static_cast<uint64_t>(i)) < threshold;
  return m;
}

// The tensor's elements in memory order (it is dense without overlap), as fp64.
at::Tensor memory_order(const at::Tensor& t) {
  return t.as_strided({t.numel()}, {1}).to(at::kDouble);
}

}  // namespace

TEST_CASE("dropout kernel: every element as LibTorch's Philox engine gives it, for each dtype, size and p") {
  auto rt = test::start_cpu_runtime();
  if (!test::plan_lists_kernel(*rt, kOp)) {
    MESSAGE("skipped: the plan lists no plugin bernoulli_ (a CPU without AVX2, said by operator_kernels_test)");
    return;
  }
  std::mt19937 rng(test_seed());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uint64_t calls = test::required_kernel_calls(*rt, kOp);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(test_seed());
  // TorchScript's dropout draws a bool mask; C++'s one of the input's dtype.
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kBool,
                                              at::kByte,  at::kChar,   at::kShort,    at::kInt,  at::kLong};
  for (int i = 0; i < 100; ++i) {
    const at::ScalarType dtype = dtypes[static_cast<size_t>(i) % dtypes.size()];
    // Sizes below one block of 32, with a tail, and many blocks over the threads.
    const int64_t n = i % 3 == 0 ? 1 + static_cast<int64_t>(rng() % 40)
                                 : (i % 3 == 1 ? 32 * (1 + rng() % 50) + rng() % 32 : 70000 + rng() % 1000);
    // The edges too: 0, 1, the largest double below 1 (p * 2^32 is exact: 2^32 - 2^-21), one
    // below 2^-32.
    const double near_one = std::nextafter(1.0, 0.0);
    const double p = i < 5 ? std::vector<double>{0.0, 1.0, 0.5, 1e-10, near_one}[static_cast<size_t>(i)] : unit(rng);
    // Now and then a channels-last or transposed tensor (dense, in another order).
    at::Tensor t = at::full({n}, 7.0, at::TensorOptions().dtype(dtype));
    if (n % 2 == 0 && i % 2 == 0) t = at::full({2, n / 2}, 7.0, at::TensorOptions().dtype(dtype)).t();
    CAPTURE(i);
    CAPTURE(n);
    CAPTURE(p);
    INFO("dtype " << c10::toString(dtype));
    const uint64_t seed = next_seed(gen);
    t.bernoulli_(p, gen);
    CHECK(test::required_kernel_calls(*rt, kOp) == ++calls);
    CHECK((t.scalar_type() == dtype));
    const at::Tensor got = memory_order(t);
    const at::Tensor want = reference_mask(seed, n, p);
    CHECK(at::equal(got, want));
    if (p == 0.0) CHECK(got.sum().item<double>() == 0.0);
    if (p == 1.0) CHECK(got.sum().item<double>() == static_cast<double>(n));
  }
}

TEST_CASE("dropout kernel: the frequency of ones and of neighbouring pairs, and a fresh mask each call") {
  auto rt = test::start_cpu_runtime();
  if (!test::plan_lists_kernel(*rt, kOp)) return;  // said in the first case
  at::manual_seed(test_seed());
  const int64_t n = 1 << 21;
  for (const double p : {0.1, 0.5, 0.9, 0.37}) {
    CAPTURE(p);
    at::Tensor a = at::empty({n}), b = at::empty({n});
    a.bernoulli_(p);
    b.bernoulli_(p);
    // Within 6 standard deviations of n p; a pair (an element and its neighbour, in the same
    // block and across blocks), and the same element in two calls, both 1 about p^2 of the time.
    const double sd = std::sqrt(n * p * (1 - p));
    CHECK(std::abs(a.sum().item<double>() - n * p) < 6 * sd);
    const double pairs = (a.slice(0, 1) * a.slice(0, 0, n - 1)).sum().item<double>();
    const double sd2 = std::sqrt(n * p * p * (1 - p * p));
    CHECK(std::abs(pairs - n * p * p) < 12 * sd2);
    const double across = (a.slice(0, 8) * a.slice(0, 0, n - 8)).sum().item<double>();  // the next word
    CHECK(std::abs(across - n * p * p) < 12 * sd2);
    const double calls = (a * b).sum().item<double>();
    CHECK(std::abs(calls - n * p * p) < 12 * sd2);
    CHECK_FALSE(at::equal(a, b));
  }
}

TEST_CASE("dropout kernel: the same seed gives the same bits at one thread and at two") {
  auto rt = test::start_cpu_runtime();
  if (!test::plan_lists_kernel(*rt, kOp)) return;  // said in the first case
  const int threads = at::get_num_threads();
  std::vector<at::Tensor> masks;
  for (const int t : {1, 2}) {
    at::set_num_threads(t);
    at::manual_seed(test_seed());
    at::Tensor m = at::empty({300001});
    m.bernoulli_(0.3);
    masks.push_back(m);
  }
  at::set_num_threads(threads);
  CHECK(at::equal(masks[0], masks[1]));
}

TEST_CASE("dropout kernel: complex numbers, strides with gaps, p outside [0, 1] and a shut gate stay LibTorch's") {
  auto rt = test::start_cpu_runtime();
  if (!test::plan_lists_kernel(*rt, kOp)) return;  // said in the first case
  at::manual_seed(test_seed());
  const std::uint64_t calls = test::required_kernel_calls(*rt, kOp);
  {
    INFO("complex numbers: whatever LibTorch's kernel does with them");
    at::Tensor t = at::zeros({1000}, at::TensorOptions().dtype(at::kComplexFloat));
    try {
      t.bernoulli_(0.5);
    } catch (const std::exception&) {
    }
  }
  {
    INFO("a strided view with gaps: only its own elements change");
    at::Tensor base = at::full({64, 64}, 7.0f);
    at::Tensor view = base.slice(1, 0, 64, 2);
    view.bernoulli_(0.5);
    CHECK(base.slice(1, 1, 64, 2).eq(7.0f).all().item<bool>());
    CHECK((view.eq(0.0f) | view.eq(1.0f)).all().item<bool>());
  }
  CHECK(test::required_kernel_calls(*rt, kOp) == calls);
  {
    INFO("p outside [0, 1]: LibTorch's error");
    at::Tensor t = at::empty({100});
    CHECK_THROWS(t.bernoulli_(1.5));
    CHECK_THROWS(t.bernoulli_(-0.1));
    CHECK_THROWS(t.bernoulli_(std::nan("")));
    CHECK(test::required_kernel_calls(*rt, kOp) == calls);
  }
  {
    INFO("a tensor p (another overload) and an empty tensor");
    at::Tensor t = at::empty({100});
    t.bernoulli_(at::full({100}, 0.5));
    CHECK(test::required_kernel_calls(*rt, kOp) == calls);
    at::Tensor empty = at::empty({0});
    empty.bernoulli_(0.5);
    CHECK(test::required_kernel_calls(*rt, kOp) == calls + 1);
  }
  // A plain plan on this thread shuts the gate: LibTorch's kernel.
  rt->apply_precision(PrecisionPlan{});
  at::Tensor t = at::empty({1000});
  t.bernoulli_(0.5);
  CHECK(test::required_kernel_calls(*rt, kOp) == calls + 1);
  rt->apply_precision(rt->precision());
  t.bernoulli_(0.5);
  CHECK(test::required_kernel_calls(*rt, kOp) == calls + 2);
}

TEST_CASE("dropout kernel: torch::dropout and Dropout modules through autograd, as a training step reaches them") {
  auto rt = test::start_cpu_runtime();
  if (!test::plan_lists_kernel(*rt, kOp)) return;  // said in the first case
  at::manual_seed(test_seed());
  const std::uint64_t calls = test::required_kernel_calls(*rt, kOp);
  const double p = 0.3;
  const at::Tensor x = (at::rand({64, 512}) + 0.5).requires_grad_(true);
  const at::Tensor y = torch::dropout(x, p, /*train=*/true);
  CHECK(test::required_kernel_calls(*rt, kOp) == calls + 1);
  const at::Tensor kept = y.ne(0);
  CHECK(kept.any().item<bool>());
  // Kept elements are x / (1 - p), the rest 0; the gradient is the mask over (1 - p).
  CHECK(at::allclose(y.masked_select(kept), x.masked_select(kept) / (1 - p)));
  const double dropped = 1.0 - kept.to(at::kDouble).mean().item<double>();
  CHECK(std::abs(dropped - p) < 6 * std::sqrt(p * (1 - p) / x.numel()));
  (y * 3).sum().backward();
  CHECK(at::allclose(x.grad(), kept.to(at::kFloat) * 3 / (1 - p)));
  // Dropout2d's per-channel mask and a module in eval mode (no mask drawn).
  torch::nn::Dropout2d drop2d(0.5);
  const at::Tensor z = drop2d(at::ones({8, 16, 4, 4}));
  CHECK(test::required_kernel_calls(*rt, kOp) == calls + 2);
  const at::Tensor per_channel = z.amax({2, 3}), per_channel_min = z.amin({2, 3});
  CHECK(at::equal(per_channel, per_channel_min));  // one value over each channel's plane
  torch::nn::Dropout drop(0.5);
  drop->eval();
  CHECK(at::equal(drop(x), x));
  CHECK(test::required_kernel_calls(*rt, kOp) == calls + 2);
}

TEST_CASE("dropout kernel: the AVX2 and AVX-512 loops give the scalar Philox's elements, for each element size") {
#if defined(__x86_64__)
  using Loop = void (*)(void*, int, uint64_t, uint64_t, int64_t, int64_t, uint32_t);
  struct IsaLoop {
    const char* isa;
    bool present;
    Loop loop;
  };
  const std::vector<IsaLoop> loops = {
      {"avx2", __builtin_cpu_supports("avx2") != 0, cpu::detail::bernoulli_blocks_avx2},
      {"avx512f", __builtin_cpu_supports("avx512f") != 0, cpu::detail::bernoulli_blocks_avx512}};
  std::mt19937_64 rng(test_seed());
  for (const auto& [isa, present, loop] : loops) {
    if (!present) {
      MESSAGE("skipped the " << isa << " loop: this CPU has no " << isa);
      continue;
    }
    INFO(isa);
    for (int i = 0; i < 40; ++i) {
      const int bytes = 1 << (i % 4);
      const uint64_t seed = rng(), one = 0xA5A5A5A5A5A5A5A5u >> (64 - 8 * bytes);
      // Runs starting at even and odd blocks, one block or many; counters near 2^32 too.
      const int64_t b0 = static_cast<int64_t>(rng() % 7) + (i % 5 == 0 ? (int64_t{1} << 29) - 3 : 0);
      const int64_t b1 = b0 + 1 + static_cast<int64_t>(rng() % 9);
      const auto threshold = static_cast<uint32_t>(rng());
      CAPTURE(i);
      CAPTURE(bytes);
      CAPTURE(b0);
      CAPTURE(b1);
      // dst[0] is element 32 * b0.
      std::vector<uint8_t> window(static_cast<size_t>((b1 - b0) * 32 * bytes), 0x5A);
      loop(window.data(), bytes, one, seed, b0, b1, threshold);
      bool all = true;
      for (int64_t e = b0 * 32; e < b1 * 32; ++e) {
        const bool set = cpu::detail::philox_element(seed, static_cast<uint64_t>(e)) < threshold;
        uint64_t got = 0;
        std::memcpy(&got, window.data() + (e - b0 * 32) * bytes, static_cast<size_t>(bytes));
        all = all && got == (set ? one : 0);
      }
      CHECK(all);
    }
  }
#else
  MESSAGE("skipped: the loops are built for x86-64 only");
#endif
}

}  // namespace dropout_kernel_suite
