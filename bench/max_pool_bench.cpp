// accelkit_bench_max_pool: the CPU plugin's 2x2 stride-2 max_pool2d and its gradient against
// LibTorch's own kernels, layer by layer, on the poolings of pytorch/examples' MNIST network and
// of small CNNs like it, beside a copy of the pooling's input (what one pass over it costs).
//
//   accelkit_bench_max_pool [--rounds R]
//
// Each layer's forward (values and indices) and backward timed in one process, the plugin's
// kernel and LibTorch's alternating call by call (LibTorch's: the same plan without the plugin's
// kernels), medians of R rounds after warm-up; "same" says whether both kernels' outputs and
// gradients were equal bit for bit.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "accelkit/runtime.hpp"
#include "bench_timing.hpp"
#include "layer_bench.hpp"

namespace {

using accelkit::bench_timing::Clock;
using accelkit::bench_timing::median;
using accelkit::bench_timing::ms_since;

struct Layer {
  const char* name;
  std::vector<int64_t> input;
};

void time_layer(accelkit::Runtime& rt, const accelkit::PrecisionPlan& libtorch_plan, int threads, int rounds,
                const Layer& l) {
  const std::vector<int64_t> k2{2, 2};
  const at::Tensor x = at::randn(l.input);
  auto fwd = [&] {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return at::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false);
  };
  const at::Tensor g = at::randn(std::get<0>(fwd()).sizes());
  auto bwd = [&](const at::Tensor& indices) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return at::max_pool2d_with_indices_backward(g, x, k2, k2, {0, 0}, {1, 1}, false, indices);
  };
  auto use = [&](bool plugin) {
    rt.apply_precision(plugin ? rt.precision() : libtorch_plan);
    at::set_num_threads(threads);
  };
  std::array<std::vector<double>, 5> t;  // plugin fwd, LibTorch fwd, plugin bwd, LibTorch bwd, copy
  bool same = true;
  for (int r = -3; r < rounds; ++r) {
    for (int v = 0; v < 2; ++v) {
      const bool plugin = (v == 0) == (r % 2 == 0);
      use(plugin);
      auto t0 = Clock::now();
      const auto out = fwd();
      const double f = ms_since(t0);
      t0 = Clock::now();
      const at::Tensor grad = bwd(std::get<1>(out));
      const double bw = ms_since(t0);
      if (r >= 0) {
        t[plugin ? 0 : 1].push_back(f);
        t[plugin ? 2 : 3].push_back(bw);
      }
      if (r == -1 && plugin) {
        use(false);
        const auto lib = fwd();
        same = at::equal(std::get<0>(out), std::get<0>(lib)) && at::equal(std::get<1>(out), std::get<1>(lib)) &&
               at::equal(grad, bwd(std::get<1>(lib)));
      }
    }
    const auto t0 = Clock::now();
    const at::Tensor copy = x.clone();
    if (r >= 0) t[4].push_back(ms_since(t0));
  }
  const double pf = median(t[0]), lf = median(t[1]), pb = median(t[2]), lb = median(t[3]);
  std::printf("  %-34s %9.4f %9.4f %7.2fx %9.4f %9.4f %7.2fx %9.4f %5s\n", l.name, pf, lf, lf / pf, pb, lb, lb / pb,
              median(t[4]), same ? "yes" : "NO");
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = accelkit::bench_layers::parse_args(argc, argv, "accelkit_bench_max_pool");
  if (!args) return 2;
  if (args->channels_last) {
    std::fprintf(stderr, "accelkit_bench_max_pool: the plugin's pooling takes NCHW inputs only\n");
    return 2;
  }
  auto rt = accelkit::Runtime::start({});
  // LibTorch's kernels: the same plan (threads, BLAS kernels) without the plugin's kernels.
  const auto libtorch_plan =
      accelkit::bench_layers::libtorch_plan(*rt, "max_pool2d_with_indices", "accelkit_bench_max_pool");
  if (!libtorch_plan) return 1;
  const int threads = at::get_num_threads();
  const std::vector<Layer> layers{
      {"MNIST example, first 64x10x24x24", {64, 10, 24, 24}},
      {"MNIST example, second 64x20x8x8", {64, 20, 8, 8}},
      {"small CNN, first 100x16x28x28", {100, 16, 28, 28}},
      {"small CNN, second 100x32x14x14", {100, 32, 14, 14}},
      {"odd planes 64x64x15x15", {64, 64, 15, 15}},
      {"wide planes 16x64x64x64", {16, 64, 64, 64}},
  };
  std::printf("max_pool2d 2x2 stride 2, %s, %d threads, fp32 NCHW, medians of %d rounds (plugin / LibTorch "
              "alternating)\n",
              rt->device().str().c_str(), threads, args->rounds);
  std::printf("  %-34s %9s %9s %8s %9s %9s %8s %9s %5s\n", "layer", "fwd ms", "LibTorch", "speedup", "bwd ms",
              "LibTorch", "speedup", "copy ms", "same");
  for (const auto& l : layers) time_layer(*rt, *libtorch_plan, threads, args->rounds, l);
  rt->apply_precision(rt->precision());
  return 0;
}
