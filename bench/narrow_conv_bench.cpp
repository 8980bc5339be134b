// accelkit_bench_narrow_conv: the CPU plugin's GEMM path for narrow convolutions against
// LibTorch's own kernel, layer by layer, on the narrow layers of pytorch/examples' MNIST and
// DCGAN networks (and one wide layer, which the plugin leaves to LibTorch, as a control).
//
//   accelkit_bench_narrow_conv [--rounds R] [--channels-last]
//
// Each layer's forward and backward (the gradients autograd asks for in training) timed in one
// process, the plugin's path and LibTorch's alternating call by call (LibTorch's: the same plan
// without the plugin's kernels), medians of R rounds after warm-up; the largest difference of the results,
// relative to their largest value, beside them.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
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
  std::vector<int64_t> input, weight;
  int64_t stride, padding;
  bool transposed;
  bool input_grad;  // the first layer's input is data: no gradient
};

struct Result {
  double forward_ms = 0, backward_ms = 0;
};

double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined()) return 0;
  return (a - b).abs().max().item<double>() / std::max(1e-30, b.abs().max().item<double>());
}

// One layer's forward and backward, the plugin's path and LibTorch's alternating (the order
// reversed every round), three rounds of warm-up; one line of medians and the results' largest
// difference.
void time_layer(accelkit::Runtime& rt, const accelkit::PrecisionPlan& libtorch_plan, int threads, int rounds,
                at::MemoryFormat fmt, const Layer& l) {
  const at::Tensor x = at::randn(l.input).contiguous(fmt), w = at::randn(l.weight).contiguous(fmt);
  const std::vector<int64_t> s{l.stride, l.stride}, p{l.padding, l.padding}, d{1, 1}, op{0, 0};
  const std::vector<int64_t> bias_sizes{w.size(l.transposed ? 1 : 0)};
  const std::array<bool, 3> mask{l.input_grad, true, false};
  auto fwd = [&] { return at::convolution(x, w, c10::nullopt, s, p, d, l.transposed, op, 1); };
  const at::Tensor g = at::randn(fwd().sizes()).contiguous(fmt);
  auto bwd = [&] { return at::convolution_backward(g, x, w, bias_sizes, s, p, d, l.transposed, op, 1, mask); };
  auto use = [&](bool plugin) {
    rt.apply_precision(plugin ? rt.precision() : libtorch_plan);
    at::set_num_threads(threads);
  };
  std::array<std::vector<double>, 4> t;  // plugin fwd, LibTorch fwd, plugin bwd, LibTorch bwd
  double diff = 0;
  for (int r = -3; r < rounds; ++r) {
    for (int v = 0; v < 2; ++v) {
      const bool plugin = (v == 0) == (r % 2 == 0);
      use(plugin);
      auto t0 = Clock::now();
      const at::Tensor out = fwd();
      const double f = ms_since(t0);
      t0 = Clock::now();
      const auto grads = bwd();
      const double b = ms_since(t0);
      if (r >= 0) {
        t[plugin ? 0 : 1].push_back(f);
        t[plugin ? 2 : 3].push_back(b);
      }
      if (r == -1 && plugin) {
        use(false);
        diff = std::max({rel_diff(out, fwd()), rel_diff(std::get<0>(grads), std::get<0>(bwd())),
                         rel_diff(std::get<1>(grads), std::get<1>(bwd()))});
      }
    }
  }
  const double pf = median(t[0]), lf = median(t[1]), pb = median(t[2]), lb = median(t[3]);
  std::printf("  %-38s %10.3f %10.3f %7.2fx %10.3f %10.3f %7.2fx %9.1e\n", l.name, pf, lf, lf / pf, pb, lb, lb / pb, diff);
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = accelkit::bench_layers::parse_args(argc, argv, "accelkit_bench_narrow_conv");
  if (!args) return 2;
  const int rounds = args->rounds;
  const bool channels_last = args->channels_last;
  auto rt = accelkit::Runtime::start({});
  // LibTorch's kernels: the same plan (threads, BLAS kernels) without the plugin's kernels.
  const auto libtorch_plan = accelkit::bench_layers::libtorch_plan(*rt, "convolution", "accelkit_bench_narrow_conv");
  if (!libtorch_plan) return 1;
  const int threads = at::get_num_threads();
  const std::vector<Layer> layers{
      {"MNIST conv1 1->10 5x5", {64, 1, 28, 28}, {10, 1, 5, 5}, 1, 0, false, false},
      {"DCGAN G1 100->256 4x4, 1x1 in (T)", {64, 100, 1, 1}, {100, 256, 4, 4}, 1, 0, true, false},
      {"DCGAN G4 64->1 4x4 s2 (T)", {64, 64, 14, 14}, {64, 1, 4, 4}, 2, 1, true, true},
      {"DCGAN D1 1->64 4x4 s2", {64, 1, 28, 28}, {64, 1, 4, 4}, 2, 1, false, false},
      {"DCGAN D1 1->64, input grad", {64, 1, 28, 28}, {64, 1, 4, 4}, 2, 1, false, true},
      {"DCGAN D4 256->1 3x3, 1x1 out", {64, 256, 3, 3}, {1, 256, 3, 3}, 1, 0, false, true},
      {"DCGAN D2 64->128 (wide: LibTorch's)", {64, 64, 14, 14}, {128, 64, 4, 4}, 2, 1, false, true},
  };
  std::printf("narrow convolutions, %s, %d threads, fp32 %s, medians of %d rounds (plugin / LibTorch alternating)\n",
              rt->device().str().c_str(), threads, channels_last ? "channels-last" : "NCHW", rounds);
  std::printf("  %-38s %10s %10s %8s %10s %10s %8s %9s\n", "layer", "fwd ms", "LibTorch", "speedup", "bwd ms",
              "LibTorch", "speedup", "max diff");
  const auto fmt = channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  for (const auto& l : layers) time_layer(*rt, *libtorch_plan, threads, rounds, fmt, l);
  rt->apply_precision(rt->precision());
  return 0;
}
