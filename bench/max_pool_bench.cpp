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

#include <cstdio>
#include <tuple>
#include <vector>

#include "layer_bench.hpp"

namespace {

struct Layer {
  const char* name;
  std::vector<int64_t> input;
};

void time_layer(const accelkit::bench_layers::Session& s, int rounds, const Layer& l) {
  const std::vector<int64_t> k2{2, 2};
  const at::Tensor x = at::randn(l.input);
  auto fwd = [&] {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return at::max_pool2d_with_indices(x, k2, k2, {0, 0}, {1, 1}, false);
  };
  const at::Tensor g = at::randn(std::get<0>(fwd()).sizes());
  auto bwd = [&](const std::tuple<at::Tensor, at::Tensor>& out) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return at::max_pool2d_with_indices_backward(g, x, k2, k2, {0, 0}, {1, 1}, false, std::get<1>(out));
  };
  bool same = true;
  const auto t = accelkit::bench_layers::alternate(
      s, rounds, x, fwd, bwd, [&](const auto& out, const at::Tensor& grad, const auto& lib, const at::Tensor& lib_grad) {
        same = at::equal(std::get<0>(out), std::get<0>(lib)) && at::equal(std::get<1>(out), std::get<1>(lib)) &&
               at::equal(grad, lib_grad);
      });
  std::printf("  %-34s %9.4f %9.4f %7.2fx %9.4f %9.4f %7.2fx %9.4f %5s\n", l.name, t.plugin_fwd, t.libtorch_fwd,
              t.libtorch_fwd / t.plugin_fwd, t.plugin_bwd, t.libtorch_bwd, t.libtorch_bwd / t.plugin_bwd, t.copy,
              same ? "yes" : "NO");
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = accelkit::bench_layers::parse_args(argc, argv, "accelkit_bench_max_pool");
  if (!args) return 2;
  if (args->channels_last) {
    std::fprintf(stderr, "accelkit_bench_max_pool: the plugin's pooling takes NCHW inputs only\n");
    return 2;
  }
  const auto session = accelkit::bench_layers::start("max_pool2d_with_indices", "accelkit_bench_max_pool");
  if (!session) return 1;
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
              session->rt->device().str().c_str(), session->threads, args->rounds);
  std::printf("  %-34s %9s %9s %8s %9s %9s %8s %9s %5s\n", "layer", "fwd ms", "LibTorch", "speedup", "bwd ms",
              "LibTorch", "speedup", "copy ms", "same");
  for (const auto& l : layers) time_layer(*session, args->rounds, l);
  session->use(true);
  return 0;
}
