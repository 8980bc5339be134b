// pytorch/examples' C++ MNIST training loop (cpp/mnist: its Net, torch::data::datasets::MNIST
// mapped through Normalize and Stack, a sequential DataLoader of batch 64, SGD lr 0.01 momentum
// 0.5, nll_loss) timed two ways in one process, epochs alternating: as written (the loader runs
// on the training thread) and with the loader wrapped in accelkit::prefetch_loader (depth 2).
// The dataset is MNIST's own idx format, written by this program with random images and labels
// (no network here) as MNIST's 10000-image test split (torch::data::datasets::MNIST insists on
// the split's exact size), so the loader does the work the example's does.
//
//   accelkit_bench_mnist_prefetch [--epochs E] [--threads T] [--workers W]
//
// Medians of E epochs per variant after one warm-up epoch each. --threads sets LibTorch's
// intra-op threads (default 1: the step on one core, the loader on the other); --workers the
// DataLoader's worker threads (the example's default: 0).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <string>
#include <vector>

#include <torch/torch.h>
#include <unistd.h>

#include "accelkit/prefetch.hpp"
#include "bench_timing.hpp"
#include "mnist_example.hpp"

namespace {

using accelkit::bench_mnist::kImages;
using accelkit::bench_mnist::Net;
using accelkit::bench_mnist::write_mnist;
using accelkit::bench_timing::Clock;
using accelkit::bench_timing::median;
using accelkit::bench_timing::ms_since;

struct Options {
  int epochs = 5;
  int threads = 1;
  int workers = 0;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "accelkit_bench_mnist_prefetch: %s\nusage: accelkit_bench_mnist_prefetch [--epochs E] "
                       "[--threads T] [--workers W]\n", why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage((a + " needs a value").c_str());
    char* end = nullptr;
    const long v = std::strtol(argv[++i], &end, 10);
    if (*end != '\0' || v < 0 || v > 10'000'000) usage((a + " needs a whole number").c_str());
    if (a == "--epochs") o.epochs = static_cast<int>(v);
    else if (a == "--threads") o.threads = static_cast<int>(v);
    else if (a == "--workers") o.workers = static_cast<int>(v);
    else usage(("unknown option " + a).c_str());
  }
  if (o.epochs < 1 || o.threads < 1) usage("--epochs and --threads must be at least 1");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  torch::set_num_threads(o.threads);
  const auto dir = std::filesystem::temp_directory_path() / ("accelkit-mnist-" + std::to_string(::getpid()));
  write_mnist(dir, kImages);

  auto dataset = torch::data::datasets::MNIST(dir.string(), torch::data::datasets::MNIST::Mode::kTest)
                     .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                     .map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(64).workers(o.workers));

  torch::manual_seed(1);
  Net model;
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
  model.train();
  double loss_sum = 0;  // read so the steps cannot be skipped
  auto step = [&](auto& batch) {
    optimizer.zero_grad();
    auto output = model.forward(batch.data);
    auto loss = torch::nll_loss(output, batch.target);
    loss.backward();
    optimizer.step();
    loss_sum += loss.template item<double>();
  };
  // The example's loop: the loader runs on this thread.
  auto plain_epoch = [&] {
    const auto t0 = Clock::now();
    for (auto& batch : *loader) step(batch);
    return ms_since(t0);
  };
  // The same loop with the loader on accelkit's prefetch thread.
  accelkit::PrefetchStats last{};
  auto prefetched_epoch = [&] {
    const auto t0 = Clock::now();
    auto batches = accelkit::prefetch_loader(*loader, accelkit::PrefetchOptions{2, std::nullopt});
    while (auto batch = batches.next()) step(*batch);
    last = batches.stats();
    return ms_since(t0);
  };

  plain_epoch();  // warm-up: the first epoch allocates
  prefetched_epoch();
  std::vector<double> plain, prefetched, waited, produced;
  const int batches = (kImages + 63) / 64;
  for (int e = 0; e < o.epochs; ++e) {
    // Alternating, the order swapped every epoch.
    if (e % 2 == 0) plain.push_back(plain_epoch());
    prefetched.push_back(prefetched_epoch());
    waited.push_back(last.waited_ms / batches);
    produced.push_back(last.produce_ms / batches);
    if (e % 2 == 1) plain.push_back(plain_epoch());
  }
  std::filesystem::remove_all(dir);

  const double p = median(plain), q = median(prefetched);
  std::printf("pytorch/examples cpp/mnist loop: %d random MNIST images (idx files), batch 64, %d batches per epoch, "
              "%d LibTorch thread(s), %d loader worker(s); medians of %d epochs each after one warm-up\n",
              kImages, batches, o.threads, o.workers, o.epochs);
  std::printf("  as written (loader in the loop):   %9.1f ms per epoch, %6.3f ms per batch\n", p, p / batches);
  std::printf("  accelkit::prefetch_loader (2):     %9.1f ms per epoch, %6.3f ms per batch\n", q, q / batches);
  std::printf("  speedup %.2fx; the loader took %.3f ms per batch on its thread and the steps waited %.3f ms per "
              "batch for it\n", p / q, median(produced), median(waited));
  std::printf("  (mean loss %.4f, read so no step is skipped)\n", loss_sum / ((2.0 + 2.0 * o.epochs) * batches));
  return 0;
}
