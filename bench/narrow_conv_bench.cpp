// accelkit_bench_narrow_conv: the CPU plugin's convolutions against LibTorch's own kernel,
// layer by layer, on the layers of pytorch/examples' MNIST and DCGAN networks and a ResNet-20.
//
//   accelkit_bench_narrow_conv [--rounds R] [--channels-last]
//
// Each layer's forward and backward (the gradients autograd asks for in training) timed in one
// process three ways, call by call in turn: the plugin's kernel as the dispatcher reaches it (a
// one-pixel layer's GEMM, or what the shape's timed choice kept - the GEMM path, the Winograd
// path or LibTorch's kernel: conv_choice.hpp), LibTorch's (the same plan without the plugin's
// kernels), and the GEMM path called directly (conv_gemm.hpp; "-" where it does not take the
// layer). Medians of R rounds after warm-up (which covers both rounds of the choice's trials);
// the largest difference of the plugin's results from LibTorch's, relative to their largest
// value, beside them.
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
#include "conv_choice.hpp"
#include "conv_gemm.hpp"
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

double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined()) return 0;
  return (a - b).abs().max().item<double>() / std::max(1e-30, b.abs().max().item<double>());
}

// One layer's forward and backward by the plugin's kernel, LibTorch's and the GEMM path directly,
// in turn (the order rotated every round), after warm-up rounds that cover the choice's trials;
// one line of medians and the largest difference of the plugin's results from LibTorch's.
void time_layer(const accelkit::bench_layers::Session& bench, int rounds, at::MemoryFormat fmt, const Layer& l) {
  namespace conv_gemm = accelkit::cpu::conv_gemm;
  const at::Tensor x = at::randn(l.input).contiguous(fmt), w = at::randn(l.weight).contiguous(fmt);
  const std::vector<int64_t> s{l.stride, l.stride}, p{l.padding, l.padding}, d{1, 1}, op{0, 0};
  const std::vector<int64_t> bias_sizes{w.size(l.transposed ? 1 : 0)};
  const std::array<bool, 3> mask{l.input_grad, true, false};
  const auto geometry = conv_gemm::fit_any(x, w, {s, p, d, op, l.transposed, 1});
  auto fwd = [&](int v) {
    if (v == 2) return conv_gemm::forward(x, w, c10::nullopt, *geometry);
    return at::convolution(x, w, c10::nullopt, s, p, d, l.transposed, op, 1);
  };
  const at::Tensor g = at::randn(fwd(1).sizes()).contiguous(fmt);
  auto bwd = [&](int v) {
    if (v == 2) return conv_gemm::backward(g, x, w, *geometry, mask);
    return at::convolution_backward(g, x, w, bias_sizes, s, p, d, l.transposed, op, 1, mask);
  };
  const int variants = geometry ? 3 : 2;  // 0: the plugin's, 1: LibTorch's, 2: the GEMM path
  std::array<std::vector<double>, 6> t;  // forward then backward, by variant
  double diff = 0;
  // Warm-up rounds that cover both rounds of the choice's trials, of all three paths.
  using Table = accelkit::cpu::conv_choice::Table;
  const int warm_up = 2 * accelkit::cpu::conv_choice::kPaths * Table::kTrials + Table::kRecheckAfter + 2;
  for (int r = -warm_up; r < rounds; ++r) {
    for (int i = 0; i < variants; ++i) {
      const int v = (i + (r + warm_up)) % variants;
      bench.use(v != 1);
      auto t0 = Clock::now();
      const at::Tensor out = fwd(v);
      const double f = ms_since(t0);
      t0 = Clock::now();
      const auto grads = bwd(v);
      const double b = ms_since(t0);
      if (r >= 0) {
        t[static_cast<size_t>(v)].push_back(f);
        t[static_cast<size_t>(3 + v)].push_back(b);
      }
      if (r == rounds - 1 && v == 0) {
        bench.use(false);
        diff = std::max({rel_diff(out, fwd(1)), rel_diff(std::get<0>(grads), std::get<0>(bwd(1))),
                         rel_diff(std::get<1>(grads), std::get<1>(bwd(1)))});
      }
    }
  }
  auto cell = [&](size_t i) { return t[i].empty() ? std::string("-") : std::to_string(median(t[i])).substr(0, 6); };
  const double pf = median(t[0]), lf = median(t[1]), pb = median(t[3]), lb = median(t[4]);
  std::printf("  %-38s %8.3f %8.3f %6.2fx %8s | %8.3f %8.3f %6.2fx %8s | %8.1e\n", l.name, pf, lf, lf / pf,
              cell(2).c_str(), pb, lb, lb / pb, cell(5).c_str(), diff);
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = accelkit::bench_layers::parse_args(argc, argv, "accelkit_bench_narrow_conv");
  if (!args) return 2;
  const int rounds = args->rounds;
  const bool channels_last = args->channels_last;
  const auto session = accelkit::bench_layers::start("convolution", "accelkit_bench_narrow_conv");
  if (!session) return 1;
  const std::vector<Layer> layers{
      {"MNIST conv1 1->10 5x5", {64, 1, 28, 28}, {10, 1, 5, 5}, 1, 0, false, false},
      {"DCGAN G1 100->256 4x4, 1x1 in (T)", {64, 100, 1, 1}, {100, 256, 4, 4}, 1, 0, true, false},
      {"DCGAN G4 64->1 4x4 s2 (T)", {64, 64, 14, 14}, {64, 1, 4, 4}, 2, 1, true, true},
      {"DCGAN D1 1->64 4x4 s2", {64, 1, 28, 28}, {64, 1, 4, 4}, 2, 1, false, false},
      {"DCGAN D1 1->64, input grad", {64, 1, 28, 28}, {64, 1, 4, 4}, 2, 1, false, true},
      {"DCGAN D4 256->1 3x3, 1x1 out", {64, 256, 3, 3}, {1, 256, 3, 3}, 1, 0, false, true},
      {"DCGAN D2 64->128 4x4 s2, 14->7", {64, 64, 14, 14}, {128, 64, 4, 4}, 2, 1, false, true},
      {"DCGAN D3 128->256 4x4 s2, 7->3", {64, 128, 7, 7}, {256, 128, 4, 4}, 2, 1, false, true},
      {"DCGAN G2 256->128 3x3 s2, 4->7 (T)", {64, 256, 4, 4}, {256, 128, 3, 3}, 2, 1, true, true},
      {"DCGAN G3 128->64 4x4 s2, 7->14 (T)", {64, 128, 7, 7}, {128, 64, 4, 4}, 2, 1, true, true},
      {"MNIST conv2 10->20 5x5, 12->8", {64, 10, 12, 12}, {20, 10, 5, 5}, 1, 0, false, true},
      {"ResNet-20 16->16 3x3, 32x32", {128, 16, 32, 32}, {16, 16, 3, 3}, 1, 1, false, true},
      {"ResNet-20 16->32 3x3 s2, 32->16", {128, 16, 32, 32}, {32, 16, 3, 3}, 2, 1, false, true},
      {"ResNet-20 32->32 3x3, 16x16", {128, 32, 16, 16}, {32, 32, 3, 3}, 1, 1, false, true},
      {"ResNet-20 64->64 3x3, 8x8", {128, 64, 8, 8}, {64, 64, 3, 3}, 1, 1, false, true},
  };
  std::printf("convolutions, %s, %d threads, fp32 %s, medians of %d rounds (plugin / LibTorch / GEMM path in turn)\n",
              session->rt->device().str().c_str(), session->threads, channels_last ? "channels-last" : "NCHW", rounds);
  std::printf("  %-38s %8s %8s %7s %8s | %8s %8s %7s %8s | %8s\n", "layer", "fwd ms", "LibTorch", "speedup", "GEMM",
              "bwd ms", "LibTorch", "speedup", "GEMM", "max diff");
  const auto fmt = channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  for (const auto& l : layers) time_layer(*session, rounds, fmt, l);
  session->use(true);
  return 0;
}
