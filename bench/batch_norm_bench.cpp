// accelkit_bench_batch_norm: the CPU plugin's training-mode batch_norm against LibTorch's own
// kernel, layer by layer, on the batch normalisations of a ResNet-20 on CIFAR-sized images and of
// pytorch/examples' DCGAN, beside a copy of the same tensor (what one pass over it costs).
//
//   accelkit_bench_batch_norm [--rounds R] [--channels-last]
//
// Each layer's forward (training mode: batch statistics, running statistics updated) and
// backward (the three gradients) timed in one process, the plugin's kernel and LibTorch's
// alternating call by call (LibTorch's: the same plan without the plugin's kernels), medians of
// R rounds after warm-up; the largest difference of the results, relative to their largest value.
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
  std::vector<int64_t> input;
};

double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined()) return 0;
  return (a - b).abs().max().item<double>() / std::max(1e-30, b.abs().max().item<double>());
}

void time_layer(const accelkit::bench_layers::Session& s, int rounds, at::MemoryFormat fmt, const Layer& l) {
  const int64_t C = l.input[1];
  const at::Tensor x = at::randn(l.input).contiguous(fmt), g = at::randn(l.input).contiguous(fmt);
  const at::Tensor w = at::rand({C}) + 0.5, b = at::randn({C});
  at::Tensor rm = at::zeros({C}), rv = at::ones({C});
  auto fwd = [&] {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return at::native_batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
  };
  using Out = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
  auto bwd = [&](const Out& f) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return at::native_batch_norm_backward(g, x, w, rm, rv, std::get<1>(f), std::get<2>(f), true, 1e-5,
                                          {true, true, true});
  };
  double diff = 0;
  const auto t = accelkit::bench_layers::alternate(
      s, rounds, x, fwd, bwd, [&](const Out& out, const Out& grads, const Out& lib, const Out& lib_grads) {
        diff = std::max({rel_diff(std::get<0>(out), std::get<0>(lib)), rel_diff(std::get<0>(grads), std::get<0>(lib_grads)),
                         rel_diff(std::get<1>(grads), std::get<1>(lib_grads)),
                         rel_diff(std::get<2>(grads), std::get<2>(lib_grads))});
      });
  std::printf("  %-30s %9.3f %9.3f %7.2fx %9.3f %9.3f %7.2fx %9.3f %9.1e\n", l.name, t.plugin_fwd, t.libtorch_fwd,
              t.libtorch_fwd / t.plugin_fwd, t.plugin_bwd, t.libtorch_bwd, t.libtorch_bwd / t.plugin_bwd, t.copy, diff);
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = accelkit::bench_layers::parse_args(argc, argv, "accelkit_bench_batch_norm");
  if (!args) return 2;
  const int rounds = args->rounds;
  const bool channels_last = args->channels_last;
  const auto session = accelkit::bench_layers::start("native_batch_norm", "accelkit_bench_batch_norm");
  if (!session) return 1;
  const std::vector<Layer> layers{
      {"ResNet-20 stage 1 128x16x32x32", {128, 16, 32, 32}},
      {"ResNet-20 stage 2 128x32x16x16", {128, 32, 16, 16}},
      {"ResNet-20 stage 3 128x64x8x8", {128, 64, 8, 8}},
      {"DCGAN G 64x256x4x4", {64, 256, 4, 4}},
      {"DCGAN G 64x128x7x7", {64, 128, 7, 7}},
      {"DCGAN G 64x64x14x14", {64, 64, 14, 14}},
      {"DCGAN D 64x256x3x3", {64, 256, 3, 3}},
  };
  std::printf("training-mode batch_norm, %s, %d threads, fp32 %s, medians of %d rounds (plugin / LibTorch "
              "alternating)\n",
              session->rt->device().str().c_str(), session->threads, channels_last ? "channels-last" : "NCHW", rounds);
  std::printf("  %-30s %9s %9s %8s %9s %9s %8s %9s %9s\n", "layer", "fwd ms", "LibTorch", "speedup", "bwd ms",
              "LibTorch", "speedup", "copy ms", "max diff");
  const auto fmt = channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  for (const auto& l : layers) time_layer(*session, rounds, fmt, l);
  session->use(true);
  return 0;
}
