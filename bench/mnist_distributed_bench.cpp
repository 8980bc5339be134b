// pytorch/examples' C++ distributed MNIST program (cpp/distributed: the MNIST network, a
// global batch of 64 split over the ranks by LibTorch's DistributedRandomSampler, SGD lr 0.01,
// nll_loss; after each backward it all-reduces every parameter's gradient, one tensor at a
// time, and divides by the world size) trained three ways on the same ranks, epochs
// alternating between them, each from the same initial weights:
//   as written   the program's own loop: LibTorch's default threads in every rank, its
//                per-tensor all-reduce after backward (over the same Gloo group; the program
//                itself makes an MPI one)
//   hand-tuned   the same loop with intra-op threads = the cores shared out between the ranks
//   accelkit     the program ported with the README's API: Runtime::start, dist::init,
//                DataParallel (bucketed all-reduce from autograd hooks), ShardSampler,
//                make_sgd, forward under rt->autocast() (step tuning observes the warm-up
//                epoch's steps; the ranks keep what their timings together favour)
// The images are MNIST's idx files written here (no network), learnable, so the test accuracy
// after the last epoch is compared. Without a launcher's variables the program starts its own
// ranks (dist::run_local_workers); rank 0 prints.
//
//   accelkit_bench_mnist_distributed [--ranks N] [--epochs E]
//
// Medians of E epochs per variant after one warm-up epoch each.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "accelkit/accelkit.hpp"
#include "bench_timing.hpp"
#include "mnist_example.hpp"

namespace {

using accelkit::bench_mnist::accuracy;
using accelkit::bench_mnist::dataset;
using accelkit::bench_mnist::kImages;
using accelkit::bench_mnist::Net;
using accelkit::bench_mnist::Variant;
using accelkit::bench_mnist::variants;
using accelkit::bench_mnist::write_mnist;
using accelkit::bench_timing::Clock;
using accelkit::bench_timing::median;
using accelkit::bench_timing::ms_since;

int usage() {
  std::fprintf(stderr, "usage: accelkit_bench_mnist_distributed [--ranks N] [--epochs E]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 2, epochs = 4;
  const int images = kImages;  // what torch::data::datasets::MNIST's test split holds
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    if (a == "--ranks") ranks = std::atoi(argv[++i]);
    else if (a == "--epochs") epochs = std::atoi(argv[++i]);
    else return usage();
  }
  if (ranks < 1 || epochs < 1) {
    std::fprintf(stderr, "accelkit_bench_mnist_distributed: --ranks and --epochs must be at least 1\n");
    return 2;
  }
  if (!std::getenv("RANK")) {  // no launcher: start the ranks
    std::vector<std::string> args{std::filesystem::read_symlink("/proc/self/exe").string()};
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    return accelkit::dist::run_local_workers(args, ranks,
                                             [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); });
  }
  try {
    const int default_threads = at::get_num_threads();  // LibTorch's own, before accelkit starts
    auto rt = accelkit::Runtime::start({});
    auto world = accelkit::dist::init(*rt);
    const int n = world->world_size(), rank = world->rank();
    const int tuned_threads = accelkit::dist::threads_per_rank(
        std::max(1u, std::thread::hardware_concurrency()), n);  // what a user would set by hand
    if (64 % n != 0) throw std::invalid_argument("the global batch of 64 does not split into " + std::to_string(n));
    const std::int64_t shard = 64 / n;

    // Every rank writes the same files into its own directory (same seed).
    const auto root = std::filesystem::temp_directory_path() /
                      ("accelkit-mnist-dist-" + std::to_string(::getppid()) + "-" + std::to_string(rank));
    write_mnist(root / "train", images, /*learnable=*/true, 7);
    write_mnist(root / "test", images, /*learnable=*/true, 8);

    std::vector<Variant> vs = variants("as written", "hand-tuned", "accelkit");
    rt->prepare(*vs[2].model);
    torch::optim::SGD sgd0(vs[0].model->parameters(), torch::optim::SGDOptions(0.01));
    torch::optim::SGD sgd1(vs[1].model->parameters(), torch::optim::SGDOptions(0.01));
    accelkit::DataParallel dp(*rt, world, *vs[2].model);
    accelkit::SGDConfig cfg;
    cfg.lr = 0.01;
    accelkit::OptimizerChoice sgd2 = rt->make_sgd(vs[2].model->parameters(), cfg);

    const std::size_t size = static_cast<std::size_t>(images);
    auto loader0 = torch::data::make_data_loader(
        dataset(root / "train"),
        torch::data::samplers::DistributedRandomSampler(size, static_cast<std::size_t>(n), static_cast<std::size_t>(rank)),
        torch::data::DataLoaderOptions().batch_size(static_cast<std::size_t>(shard)));
    auto loader1 = torch::data::make_data_loader(
        dataset(root / "train"),
        torch::data::samplers::DistributedRandomSampler(size, static_cast<std::size_t>(n), static_cast<std::size_t>(rank)),
        torch::data::DataLoaderOptions().batch_size(static_cast<std::size_t>(shard)));
    auto loader2 = torch::data::make_data_loader(dataset(root / "train"),
                                                 accelkit::ShardSampler::for_group(size, *world, /*seed=*/1),
                                                 torch::data::DataLoaderOptions().batch_size(static_cast<std::size_t>(shard)));

    // The program's loop: backward, then each gradient all-reduced and divided by the world.
    // Plain LibTorch: fp32, no autocast (Runtime::start turned it on for this thread), its threads.
    auto as_written = [&](Variant& v, torch::optim::SGD& opt, auto& loader, int threads) {
      accelkit::PrecisionPlan plain;
      plain.threads = threads;
      rt->apply_precision(plain);
      const auto t0 = Clock::now();
      for (auto& batch : *loader) {
        v.model->zero_grad();
        auto loss = torch::nll_loss(v.model->forward(batch.data), batch.target);
        loss.backward();
        for (auto& p : v.model->parameters()) {
          std::vector<at::Tensor> one{p.grad()};
          world->all_reduce_sum(one);
          p.mutable_grad().div_(n);
        }
        opt.step();
        v.loss_sum += loss.template item<double>();
        ++v.steps;
      }
      return ms_since(t0);
    };
    auto ported = [&](Variant& v) {
      rt->apply_precision(rt->precision());  // the plan's threads (the ranks' share of the cores)
      const auto t0 = Clock::now();
      for (auto& batch : *loader2) {
        accelkit::zero_grad(*sgd2.optimizer);
        at::Tensor out;
        {
          auto ac = rt->autocast();
          out = v.model->forward(batch.data);
        }
        auto loss = torch::nll_loss(out.to(at::kFloat), batch.target);
        dp.backward(loss);
        sgd2.optimizer->step();
        v.loss_sum += loss.item<double>();
        ++v.steps;
      }
      return ms_since(t0);
    };
    auto run = [&](int which) {
      switch (which) {
        case 0: return as_written(vs[0], sgd0, loader0, default_threads);
        case 1: return as_written(vs[1], sgd1, loader1, tuned_threads);
        default: return ported(vs[2]);
      }
    };

    if (rank == 0)
      std::printf("pytorch/examples cpp/distributed: %d ranks, %d learnable MNIST-format images, global batch 64 (%lld "
                  "per rank), SGD lr 0.01; LibTorch %s, default threads %d per rank, hand-tuned %d; device %s\n",
                  n, images, static_cast<long long>(shard), TORCH_VERSION, default_threads, tuned_threads,
                  rt->device().str().c_str());
    for (int w = 0; w < 3; ++w) {
      vs[static_cast<std::size_t>(w)].first_ms = run(w);  // warm-up epoch each
      if (rank == 0) std::fprintf(stderr, "warm-up epoch %d of 3 done\n", w + 1);
    }
    for (int e = 0; e < epochs; ++e) {
      for (int k = 0; k < 3; ++k) {
        const int w = (e % 2 == 0) ? k : 2 - k;  // the order reversed every epoch
        vs[static_cast<std::size_t>(w)].epochs_ms.push_back(run(w));
      }
      if (rank == 0) std::fprintf(stderr, "epoch %d of %d done\n", e + 1, epochs);
    }
    std::vector<double> acc;
    if (rank == 0) {  // each model evaluated the way it trained
      accelkit::PrecisionPlan plain;
      plain.threads = tuned_threads;
      rt->apply_precision(plain);
      acc.push_back(accuracy(*vs[0].model, root / "test", [] { return 0; }));
      acc.push_back(accuracy(*vs[1].model, root / "test", [] { return 0; }));
      rt->apply_precision(rt->precision());
      acc.push_back(accuracy(*vs[2].model, root / "test", [&] { return rt->autocast(); }));
    }
    // The ranks' copies of each model must not have drifted apart.
    double drift = 0;
    for (auto& v : vs) {
      for (auto& p : v.model->parameters()) {
        at::Tensor mine = p.detach().to(at::kFloat).clone(), sum = mine.clone();
        std::vector<at::Tensor> one{sum};
        world->all_reduce_sum(one);
        drift = std::max(drift, (one[0] / n - mine).abs().max().item<double>());
      }
    }
    std::filesystem::remove_all(root);
    world->barrier();
    if (rank != 0) return 0;

    std::printf("medians of %d epochs each after one warm-up epoch, variants alternating:\n", epochs);
    std::printf("  %-11s %12s %12s %12s %10s %10s %10s\n", "variant", "epoch ms", "step ms", "first epoch", "speedup",
                "mean loss", "test acc");
    const double base = median(vs[0].epochs_ms);
    for (std::size_t i = 0; i < vs.size(); ++i) {
      const double m = median(vs[i].epochs_ms);
      const double steps_per_epoch = static_cast<double>(vs[i].steps) / (epochs + 1.0);
      std::printf("  %-11s %12.1f %12.3f %12.1f %9.2fx %10.4f %9.2f%%\n", vs[i].name.c_str(), m, m / steps_per_epoch,
                  vs[i].first_ms, base / m, vs[i].loss_sum / static_cast<double>(std::max<std::int64_t>(vs[i].steps, 1)),
                  acc[i]);
    }
    const double tuned = median(vs[1].epochs_ms), accel = median(vs[2].epochs_ms);
    std::printf("accelkit is %.2fx the program as written and %.2fx hand-tuned; accuracy %+.2f points vs as written; "
                "largest difference between the ranks' weights %.3g\n",
                base / accel, tuned / accel, acc[2] - acc[0], drift);
    const accelkit::PrecisionPlan& plan = rt->precision();
    std::printf("accelkit: optimizer %s; %zu gradient bucket(s) of <= %lld MiB; the plan %s, %d thread%s per rank\n",
                sgd2.implementation.c_str(), dp.buckets(), static_cast<long long>(dp.bucket_bytes() >> 20),
                plan.autocast ? (std::string(accelkit::to_string(plan.dtype)) + " autocast").c_str() : "fp32",
                plan.threads, plan.threads == 1 ? "" : "s");
    const accelkit::StepTuningStatus& st = rt->step_tuning();
    std::printf("step tuning: %s%s (%s; %s)\n", st.state == accelkit::StepTuningStatus::State::decided ? "kept " : "",
                st.state == accelkit::StepTuningStatus::State::decided ? st.candidates[st.chosen].label().c_str() : "off",
                st.source.c_str(), st.why.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accelkit_bench_mnist_distributed: %s\n", e.what());
    std::_Exit(1);
  }
}
