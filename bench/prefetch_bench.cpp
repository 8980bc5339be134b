// accelkit::Prefetcher against producing each batch in the step, on the same work in one
// process: a producer that "decodes" image batches (uint8 images to float, resized to 224 and
// normalised, with LibTorch's CPU kernels) or sleeps (I/O), and an MLP training step. Without
// prefetching a batch costs producer + step; with it, max(producer, step) at best.
//
//   accelkit_bench_prefetch [--producer compute|sleep] [--producer-ms MS] [--step-ms MS]
//                           [--batches N] [--rounds R] [--depth D]
//
// Variants alternate round by round; each round times N batches; medians over R rounds after
// one warm-up round. LibTorch runs 1 intra-op thread (the step on one core, the producer on
// another: the overlap measured is the pipeline's, not extra threads').
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "accelkit/prefetch.hpp"
#include "bench_timing.hpp"

namespace {

using accelkit::bench_timing::Clock;
using accelkit::bench_timing::median;
using accelkit::bench_timing::ms_since;

struct Options {
  bool sleep = false;        // producer: sleep (I/O) instead of decoding
  double producer_ms = 5;    // target producer time per batch
  double step_ms = 5;        // target step time
  int batches = 20;          // per round
  int rounds = 7;
  std::size_t depth = 2;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "accelkit_bench_prefetch: %s\nusage: accelkit_bench_prefetch [--producer compute|sleep] "
                       "[--producer-ms MS] [--step-ms MS] [--batches N] [--rounds R] [--depth D]\n", why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    auto number = [&](double lo, double hi) {
      const std::string v = value();
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (!end || *end != '\0' || !(x >= lo && x <= hi)) usage((a + " " + v + ": out of range").c_str());
      return x;
    };
    if (a == "--producer") {
      const std::string v = value();
      if (v != "compute" && v != "sleep") usage(("--producer " + v + ": compute or sleep").c_str());
      o.sleep = v == "sleep";
    } else if (a == "--producer-ms") o.producer_ms = number(0.1, 1000);
    else if (a == "--step-ms") o.step_ms = number(0.1, 1000);
    else if (a == "--batches") o.batches = static_cast<int>(number(2, 10000));
    else if (a == "--rounds") o.rounds = static_cast<int>(number(1, 1000));
    else if (a == "--depth") o.depth = static_cast<std::size_t>(number(1, 64));
    else usage(("unknown option " + a).c_str());
  }
  return o;
}

// The producer's work: `images` image-like uint8 3x256x256 samples (smooth structure + noise)
// decoded to float, resized to 224x224, normalised per channel.
at::Tensor decode(std::int64_t images, std::uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  at::Tensor coarse = at::rand({images, 3, 16, 16}, gen) * 200;
  at::Tensor raw = (at::upsample_bilinear2d(coarse, {256, 256}, false) + at::randn({images, 3, 256, 256}, gen) * 8)
                       .clamp(0, 255)
                       .to(at::kByte);
  at::Tensor x = at::upsample_bilinear2d(raw.to(at::kFloat).div_(255), {224, 224}, false);
  const at::Tensor mean = at::tensor({0.485, 0.456, 0.406}, at::kFloat).view({1, 3, 1, 1});
  const at::Tensor std = at::tensor({0.229, 0.224, 0.225}, at::kFloat).view({1, 3, 1, 1});
  return (x - mean) / std;
}

struct Step {
  torch::nn::Sequential net;
  std::unique_ptr<torch::optim::SGD> opt;
  explicit Step(std::int64_t width)
      : net(torch::nn::Linear(64, width), torch::nn::ReLU(), torch::nn::Linear(width, width), torch::nn::ReLU(),
            torch::nn::Linear(width, 10)) {
    opt = std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(1e-3));
  }
  // The batch's images pooled to 64 features, through the MLP; one SGD step.
  void run(const at::Tensor& images, std::int64_t rows) {
    at::Tensor feats = at::adaptive_avg_pool2d(images, {1, 1}).flatten(1);  // images x 3
    feats = feats.repeat({1, 22}).narrow(1, 0, 64).repeat({(rows + feats.size(0) - 1) / feats.size(0), 1}).narrow(0, 0, rows);
    opt->zero_grad();
    net->forward(feats).pow(2).mean().backward();
    opt->step();
  }
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  at::set_num_threads(1);
  torch::manual_seed(0);

  // Calibrate: the images per batch for the producer's time, the MLP width for the step's.
  std::int64_t images = 1;
  if (!o.sleep) {
    for (int i = 0; i < 2; ++i) (void)decode(1, 0);
    auto t0 = Clock::now();
    for (int i = 0; i < 5; ++i) (void)decode(1, static_cast<std::uint64_t>(i));
    const double per_image = ms_since(t0) / 5;
    images = std::max<std::int64_t>(1, static_cast<std::int64_t>(o.producer_ms / per_image + 0.5));
  }
  const std::int64_t rows = 256;
  std::int64_t width = 64;
  const at::Tensor sample = decode(images, 1);
  for (;;) {
    Step s(width);
    for (int i = 0; i < 3; ++i) s.run(sample, rows);
    auto t0 = Clock::now();
    for (int i = 0; i < 5; ++i) s.run(sample, rows);
    if (ms_since(t0) / 5 >= o.step_ms || width >= 8192) break;
    width = width * 5 / 4 + 8;
  }

  std::uint64_t seed = 0;
  auto produce = [&]() -> at::Tensor {
    if (o.sleep) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.producer_ms));
      return sample;
    }
    return decode(images, seed++);
  };
  Step step(width);

  // Each part alone (median of 9 after 2).
  auto alone = [&](auto&& body) {
    std::vector<double> t;
    for (int i = 0; i < 11; ++i) {
      auto t0 = Clock::now();
      body();
      if (i >= 2) t.push_back(ms_since(t0));
    }
    return median(t);
  };
  const double producer_alone = alone([&] { (void)produce(); });
  const double step_alone = alone([&] { step.run(sample, rows); });

  // One round: N batches, inline (depth 0) or prefetched; ms per batch.
  auto round = [&](std::size_t depth) {
    int left = o.batches;
    accelkit::Prefetcher<at::Tensor> batches(
        [&]() -> std::optional<at::Tensor> {
          if (left == 0) return std::nullopt;
          --left;
          return produce();
        },
        accelkit::PrefetchOptions{depth, std::nullopt});
    auto t0 = Clock::now();
    int n = 0;
    while (auto b = batches.next()) {
      step.run(*b, rows);
      ++n;
    }
    const double per = ms_since(t0) / n;
    return std::make_pair(per, batches.stats().mean_wait_ms());
  };
  (void)round(0);
  (void)round(o.depth);
  std::vector<double> inline_ms, ahead_ms, inline_wait, ahead_wait;
  for (int r = 0; r < o.rounds; ++r) {
    auto [a, aw] = round(0);
    auto [b, bw] = round(o.depth);
    inline_ms.push_back(a);
    inline_wait.push_back(aw);
    ahead_ms.push_back(b);
    ahead_wait.push_back(bw);
  }
  const double in = median(inline_ms), ahead = median(ahead_ms);
  const double floor = std::max(producer_alone, step_alone);
  const double overlap = (in - ahead) / std::min(producer_alone, step_alone);

  std::printf("accelkit_bench_prefetch: producer %s (%s), step: MLP 64-%lld-%lld-10 on %lld rows + SGD; "
              "1 LibTorch thread; %d batches per round, %d rounds after 1 warm-up, variants alternating\n",
              o.sleep ? "sleeps" : "decodes", o.sleep ? "I/O-like" :
              (std::to_string(images) + " image(s) 3x256x256 uint8 -> 3x224x224 float, normalised").c_str(),
              static_cast<long long>(width), static_cast<long long>(width), static_cast<long long>(rows),
              o.batches, o.rounds);
  std::printf("  producer alone      %8.2f ms\n", producer_alone);
  std::printf("  step alone          %8.2f ms\n", step_alone);
  std::printf("  sum / max           %8.2f / %.2f ms\n", producer_alone + step_alone, floor);
  std::printf("  in the step (0)     %8.2f ms per batch (median; waited %.2f ms per batch)\n", in, median(inline_wait));
  std::printf("  prefetched (%zu)     %8.2f ms per batch (median; waited %.2f ms per batch)\n", o.depth, ahead,
              median(ahead_wait));
  std::printf("  speedup             %8.2fx; prefetched / max(producer, step) = %.2f; overlap %.0f%% of the "
              "shorter part hidden\n", in / ahead, ahead / floor, 100 * overlap);
  return 0;
}
