// pytorch/examples' C++ MNIST program (cpp/mnist: its Net, MNIST through Normalize and Stack, a
// sequential DataLoader of batch 64, SGD lr 0.01 momentum 0.5, nll_loss) trained three ways in
// one process, epochs alternating between them, each from the same initial weights:
//   original    the program as written: LibTorch's default threads, fp32, torch::optim::SGD
//   hand-tuned  what a LibTorch user tunes by hand: intra-op threads = the machine's cores
//   accelkit    the program ported with the README's API and the default settings:
//               Runtime::start, prepare(model, its own SGD), forward under rt->autocast(), the
//               loss in fp32 outside it, rt->step(optimizer), prefetch_loader(loader,
//               prefetch_options(*rt))
// The images are MNIST's idx files written here (no network): each class a pattern of strokes
// under noise, so the network learns and the test accuracy after the last epoch can be
// compared. The accelkit run starts with an empty cache: its first epoch includes the steps
// the step tuner observes (shown apart).
//
//   accelkit_bench_mnist_program [--epochs E] [--only original|hand-tuned|accelkit [--trace FILE]]
//
// --only trains one variant alone (its epochs, no comparison): for a profiler over one of them.
// --trace writes a Chrome trace of one more epoch of it and prints the operations that took the
// time (accelkit::Trace: LibTorch's profiler, whose overhead falls in the small operations).
//
// Medians of E epochs per variant after one warm-up epoch each.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>
#include <unistd.h>

#include "accelkit/prefetch.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/trace.hpp"
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

struct Options {
  int epochs = 4;
  std::string only;        // one variant alone, or "" for all three in turn
  std::string trace_path;  // with `only`: a trace of one more epoch
};

// The command line, or the exit status for one the bench refuses (after saying why).
std::optional<int> parse(int argc, char** argv, Options& o) {
  const char* usage = "usage: accelkit_bench_mnist_program [--epochs E] [--only original|hand-tuned|accelkit [--trace FILE]]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string next = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--epochs" && i + 1 < argc) {
      o.epochs = std::atoi(argv[++i]);
    } else if (a == "--only" && (next == "original" || next == "hand-tuned" || next == "accelkit")) {
      o.only = argv[++i];
    } else if (a == "--trace" && i + 1 < argc) {
      o.trace_path = argv[++i];
    } else {
      std::fprintf(stderr, "%s", usage);
      return 2;
    }
  }
  if (!o.trace_path.empty() && o.only.empty()) {
    std::fprintf(stderr, "accelkit_bench_mnist_program: --trace needs --only\n");
    return 2;
  }
  if (!o.trace_path.empty()) accelkit::check_trace_path(o.trace_path);
  if (o.epochs < 1) {
    std::fprintf(stderr, "accelkit_bench_mnist_program: --epochs must be at least 1\n");
    return 2;
  }
  return std::nullopt;
}

// One variant alone: its warm-up epoch and `epochs` more, then (with a trace path) one more under
// LibTorch's profiler, the operations that took its time printed.
void train_alone(Variant& v, const std::function<double()>& epoch, const Options& o, int batches) {
  v.first_ms = epoch();
  for (int e = 0; e < o.epochs; ++e) v.epochs_ms.push_back(epoch());
  if (!o.trace_path.empty()) {
    accelkit::Trace trace;
    accelkit::TraceOptions to;
    to.path = o.trace_path;
    to.memory = false;
    to.top = 30;
    trace.start(to);
    epoch();
    const auto summary = trace.stop();
    std::printf("%s: one epoch traced by %s in %s; self time over its %d steps:\n", v.name.c_str(),
                summary.profiler.c_str(), summary.path.c_str(), batches);
    for (const auto& op : summary.top_by_self_time)
      std::printf("  %9.1f us a step %6lld calls  %s\n", op.self_us / batches, static_cast<long long>(op.calls),
                  op.name.c_str());
  }
  std::printf("%s alone: first epoch %.1f ms, median of %d epochs after it %.1f ms (%.3f ms a batch)\n", v.name.c_str(),
              v.first_ms, o.epochs, median(v.epochs_ms), median(v.epochs_ms) / batches);
}

void banner(int batches, int default_threads, int cores, const accelkit::Runtime& rt) {
  std::printf("pytorch/examples cpp/mnist: %d learnable MNIST-format images, batch 64, %d batches per epoch, SGD lr "
              "0.01 momentum 0.5; LibTorch default threads %d, cores %d; device %s (%s)\n",
              kImages, batches, default_threads, cores, rt.device().str().c_str(),
              rt.context().require_device().plugin.c_str());
}

// Each variant's test accuracy, evaluated as it trained: the plain ones in fp32 at LibTorch's
// default threads, accelkit's under its plan and autocast.
std::vector<double> accuracies(std::vector<Variant>& vs, const std::filesystem::path& test_dir, accelkit::Runtime& rt,
                               int default_threads) {
  accelkit::PrecisionPlan plain;
  plain.threads = default_threads;
  rt.apply_precision(plain);
  std::vector<double> acc;
  acc.push_back(accuracy(*vs[0].model, test_dir, [] { return 0; }));
  acc.push_back(accuracy(*vs[1].model, test_dir, [] { return 0; }));
  rt.apply_precision(rt.precision());
  acc.push_back(accuracy(*vs[2].model, test_dir, [&] { return rt.autocast(); }));
  return acc;
}

// A warm-up epoch of each variant, then `epochs` rounds of one epoch each, the order reversed
// every round.
void train_in_turn(std::vector<Variant>& vs, const std::function<double(int)>& epoch_of, int epochs) {
  for (int w = 0; w < 3; ++w) vs[static_cast<std::size_t>(w)].first_ms = epoch_of(w);
  for (int e = 0; e < epochs; ++e)
    for (int k = 0; k < 3; ++k) {
      const int w = (e % 2 == 0) ? k : 2 - k;
      vs[static_cast<std::size_t>(w)].epochs_ms.push_back(epoch_of(w));
    }
}

// The three variants' medians, speedups and accuracies, and what accelkit decided.
void report(const std::vector<Variant>& vs, const std::vector<double>& acc, int epochs, int batches,
            const accelkit::Runtime& rt, const accelkit::Adoption& adopted) {
  accelkit::bench_timing::print_epoch_table(vs, acc, epochs, batches);
  const double base = median(vs[0].epochs_ms);
  const double tuned = median(vs[1].epochs_ms), accel = median(vs[2].epochs_ms);
  std::printf("accelkit (defaults) is %.2fx the original program and %.2fx hand-tuned LibTorch; accuracy %+.2f points "
              "vs the original\n", base / accel, tuned / accel, acc[2] - acc[0]);
  const auto& st = rt.step_tuning();
  const char* state = st.state == accelkit::StepTuningStatus::State::decided    ? "decided"
                      : st.state == accelkit::StepTuningStatus::State::observing ? "still observing"
                                                                                 : "off";
  std::printf("accelkit: optimizer %s; step tuning %s: %s%s%s\n", adopted.implementation.c_str(), state,
              st.state == accelkit::StepTuningStatus::State::decided
                  ? (st.candidates[st.chosen].label() + " - ").c_str()
                  : "",
              st.why.c_str(), st.source.empty() ? "" : (" [" + st.source + "]").c_str());
  std::printf("  (mean losses %.4f / %.4f / %.4f, read so no step is skipped)\n",
              vs[0].loss_sum / ((epochs + 1.0) * batches), vs[1].loss_sum / ((epochs + 1.0) * batches),
              vs[2].loss_sum / ((epochs + 1.0) * batches));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const auto refused = parse(argc, argv, o)) return *refused;
  const int epochs = o.epochs;
  const auto root = std::filesystem::temp_directory_path() / ("accelkit-mnist-program-" + std::to_string(::getpid()));
  const auto train_dir = root / "train", test_dir = root / "test", cache_dir = root / "cache";
  write_mnist(train_dir, kImages, /*learnable=*/true, 7);
  write_mnist(test_dir, kImages, /*learnable=*/true, 8);
  ::setenv("ACCELKIT_CACHE_DIR", cache_dir.c_str(), 1);  // a first run: nothing tuned yet

  const int default_threads = at::get_num_threads();  // before anything sets them
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto rt = accelkit::Runtime::start({});
  at::set_num_threads(default_threads);

  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      dataset(train_dir), torch::data::DataLoaderOptions().batch_size(64));
  const int batches = (kImages + 63) / 64;

  std::vector<Variant> vs = variants("original", "hand-tuned", "accelkit");
  torch::optim::SGD sgd0(vs[0].model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
  torch::optim::SGD sgd1(vs[1].model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
  torch::optim::SGD sgd2(vs[2].model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
  const accelkit::Adoption adopted = rt->prepare(*vs[2].model, sgd2);

  // Plain LibTorch: fp32, no autocast (Runtime::start turned it on for this thread), its threads.
  auto plain_epoch = [&](Variant& v, torch::optim::Optimizer& opt, int threads) {
    accelkit::PrecisionPlan plain;
    plain.threads = threads;
    rt->apply_precision(plain);
    const auto t0 = Clock::now();
    for (auto& batch : *loader) {
      opt.zero_grad();
      auto loss = torch::nll_loss(v.model->forward(batch.data), batch.target);
      loss.backward();
      opt.step();
      v.loss_sum += loss.item<double>();
    }
    return ms_since(t0);
  };
  auto accelkit_epoch = [&](Variant& v) {
    rt->apply_precision(rt->precision());
    const auto t0 = Clock::now();
    auto batches_in = accelkit::prefetch_loader(*loader, accelkit::prefetch_options(*rt));
    while (auto batch = batches_in.next()) {
      sgd2.zero_grad();
      at::Tensor out;
      {
        auto ac = rt->autocast();
        out = v.model->forward(batch->data);
      }
      auto loss = torch::nll_loss(out.to(at::kFloat), batch->target);
      loss.backward();
      rt->step(sgd2);
      v.loss_sum += loss.item<double>();
    }
    return ms_since(t0);
  };
  auto run = [&](int which) {
    switch (which) {
      case 0: return plain_epoch(vs[0], sgd0, default_threads);
      case 1: return plain_epoch(vs[1], sgd1, cores);
      default: return accelkit_epoch(vs[2]);
    }
  };

  banner(batches, default_threads, cores, *rt);
  if (!o.only.empty()) {
    const int w = o.only == "original" ? 0 : o.only == "hand-tuned" ? 1 : 2;
    train_alone(vs[static_cast<std::size_t>(w)], [&] { return run(w); }, o, batches);
    std::filesystem::remove_all(root);
    return 0;
  }
  train_in_turn(vs, [&](int w) { return run(w); }, epochs);
  const std::vector<double> acc = accuracies(vs, test_dir, *rt, default_threads);
  std::filesystem::remove_all(root);

  report(vs, acc, epochs, batches, *rt, adopted);
  return 0;
}
