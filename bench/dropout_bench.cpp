// accelkit_bench_dropout: dropout's mask by the CPU plugin's bernoulli_ against LibTorch's own
// kernel, on the dropouts of a small transformer (d 128, 4 heads, feed-forward 512, batch 64 x
// 64 tokens) and of an MLP's hidden layer, beside a copy of the same tensor.
//
//   accelkit_bench_dropout [--rounds R]
//
// Each layer's whole training-mode dropout (torch::dropout: the mask, then the multiply) and its
// bernoulli_ alone, in fp32 and bf16, timed in one process, the plugin's kernel and LibTorch's
// alternating call by call (LibTorch's: the same plan without the plugin's kernels), medians of
// R rounds after warm-up; and the fraction of elements each kept, against 1 - p.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

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
  std::vector<int64_t> shape;
  double p;
};

void time_layer(const accelkit::bench_layers::Session& bench, int rounds, at::ScalarType dtype, const Layer& l) {
  const at::Tensor x = at::randn(l.shape).to(dtype);
  at::Tensor mask = at::empty_like(x);
  std::array<std::vector<double>, 5> t;  // plugin dropout, LibTorch dropout, plugin mask, LibTorch mask, copy
  std::array<double, 2> kept{0, 0};
  for (int r = -3; r < rounds; ++r) {
    for (int v = 0; v < 2; ++v) {
      const bool plugin = (v == 0) == (r % 2 == 0);
      bench.use(plugin);
      auto t0 = Clock::now();
      const at::Tensor y = torch::dropout(x, l.p, /*train=*/true);
      const double d = ms_since(t0);
      t0 = Clock::now();
      mask.bernoulli_(1 - l.p);
      const double m = ms_since(t0);
      if (r >= 0) {
        t[plugin ? 0 : 1].push_back(d);
        t[plugin ? 2 : 3].push_back(m);
        kept[plugin ? 0 : 1] += mask.to(at::kDouble).mean().item<double>() / rounds;
      }
    }
    const auto t0 = Clock::now();
    const at::Tensor copy = x.clone();
    if (r >= 0) t[4].push_back(ms_since(t0));
  }
  const double pd = median(t[0]), ld = median(t[1]), pm = median(t[2]), lm = median(t[3]);
  std::printf("  %-34s %-5s %9.3f %9.3f %7.2fx %9.3f %9.3f %7.2fx %8.3f %7.4f %7.4f %6.4f\n", l.name,
              dtype == at::kFloat ? "fp32" : "bf16", pd, ld, ld / pd, pm, lm, lm / pm, median(t[4]), kept[0], kept[1],
              1 - l.p);
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = accelkit::bench_layers::parse_args(argc, argv, "accelkit_bench_dropout");
  if (!args || args->channels_last) {
    if (args) std::fprintf(stderr, "accelkit_bench_dropout: --channels-last does not apply\n");
    return 2;
  }
  const auto session = accelkit::bench_layers::start("bernoulli_.float", "accelkit_bench_dropout");
  if (!session) return 1;
  const std::vector<Layer> layers{
      {"attention weights 256x64x64, p 0.1", {256, 64, 64}, 0.1},
      {"attention output 4096x128, p 0.1", {4096, 128}, 0.1},
      {"feed-forward 4096x512, p 0.1", {4096, 512}, 0.1},
      {"MLP hidden 256x4096, p 0.5", {256, 4096}, 0.5},
  };
  std::printf("training-mode dropout, %s, %d threads, medians of %d rounds (plugin / LibTorch alternating)\n",
              session->rt->device().str().c_str(), session->threads, args->rounds);
  std::printf("  %-34s %-5s %9s %9s %8s %9s %9s %8s %8s %7s %7s %6s\n", "layer", "dtype", "drop ms", "LibTorch",
              "speedup", "mask ms", "LibTorch", "speedup", "copy ms", "kept", "LibT", "1-p");
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16})
    for (const auto& l : layers) time_layer(*session, args->rounds, dtype, l);
  session->use(true);
  return 0;
}
