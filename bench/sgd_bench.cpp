// accelkit_bench_sgd: one SGD step, torch::optim::SGD (plain: LibTorch's default threads; tuned:
// every logical core) against the CPU plugin's FusedSGD (every logical core), in alternating
// rounds after warm-up; medians. Two parameter sets: a large one (16 x 1024^2 + biases, 16.8M
// parameters, memory-bound) and pytorch/examples' MNIST CNN (21.8K parameters, 8 tensors, where
// the per-tensor overhead decides), each with the MNIST example's options (momentum 0.5) and
// with momentum 0.9 + Nesterov + weight decay. Before timing, 5 steps of each optimizer from
// the same params and grads are compared with torch::optim::SGD (max |difference|).
//
//   accelkit_bench_sgd [--rounds R] [--steps N]
#include <ATen/Parallel.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_timing.hpp"
#include "fused_sgd.hpp"

namespace {

using accelkit::bench_timing::Clock;
using accelkit::bench_timing::median;
using accelkit::bench_timing::ms_since;
using torch::optim::SGDOptions;

std::vector<at::Tensor> large_params() {
  std::vector<at::Tensor> out;
  for (int i = 0; i < 16; ++i) {
    out.push_back(at::randn({1024, 1024}));
    out.push_back(at::randn({1024}));
  }
  return out;
}

// pytorch/examples cpp/mnist: conv1 1->10 k5, conv2 10->20 k5, fc1 320->50, fc2 50->10.
std::vector<at::Tensor> mnist_params() {
  return {at::randn({10, 1, 5, 5}), at::randn({10}), at::randn({20, 10, 5, 5}), at::randn({20}),
          at::randn({50, 320}),     at::randn({50}), at::randn({10, 50}),        at::randn({10})};
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& ps) {
  std::vector<at::Tensor> out;
  for (const auto& p : ps) {
    out.push_back(p.clone());
    out.back().mutable_grad() = at::randn_like(p);
  }
  return out;
}

struct Variant {
  std::string name;
  int threads;
  std::vector<at::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> opt;
  std::vector<double> ms;
};

void run_set(const char* set, const std::vector<at::Tensor>& base, const SGDOptions& o, const char* options_text,
             int rounds, int steps) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int plain_threads = at::get_num_threads();
  std::int64_t numel = 0;
  for (const auto& p : base) numel += p.numel();
  std::vector<Variant> vs;
  vs.push_back({"torch::optim::SGD (plain)", plain_threads, clones(base), nullptr, {}});
  vs.push_back({"torch::optim::SGD (tuned)", cores, clones(base), nullptr, {}});
  vs.push_back({"accelkit FusedSGD", cores, clones(base), nullptr, {}});
  // The same grads everywhere.
  for (std::size_t i = 0; i < base.size(); ++i)
    for (std::size_t v = 1; v < vs.size(); ++v) vs[v].params[i].mutable_grad() = vs[0].params[i].grad().clone();
  vs[0].opt = std::make_unique<torch::optim::SGD>(vs[0].params, o);
  vs[1].opt = std::make_unique<torch::optim::SGD>(vs[1].params, o);
  vs[2].opt = std::make_unique<accelkit::cpu::FusedSGD>(vs[2].params, o);
  // Check: 5 steps each from the same params and grads.
  for (auto& v : vs) {
    at::set_num_threads(v.threads);
    for (int s = 0; s < 5; ++s) v.opt->step();
  }
  double diff = 0;
  for (std::size_t i = 0; i < base.size(); ++i)
    diff = std::max(diff, (vs[2].params[i] - vs[0].params[i]).abs().max().item<double>());
  std::printf("\n%s (%lld parameters in %zu tensors), %s\n", set, static_cast<long long>(numel), base.size(), options_text);
  std::printf("  check: after 5 steps, FusedSGD vs torch::optim::SGD max |difference| %.3g\n", diff);
  // Warm-up, then alternating rounds.
  for (auto& v : vs) {
    at::set_num_threads(v.threads);
    for (int s = 0; s < 3; ++s) v.opt->step();
  }
  const int per_round = std::max(1, steps / rounds);
  for (int r = 0; r < rounds; ++r)
    for (auto& v : vs) {
      at::set_num_threads(v.threads);
      for (int s = 0; s < per_round; ++s) {
        const auto t = Clock::now();
        v.opt->step();
        v.ms.push_back(ms_since(t));
      }
    }
  const double bytes = static_cast<double>(numel) * 4 * (o.momentum() != 0 ? 5 : 3);
  const double plain = median(vs[0].ms);
  std::printf("  %-28s %7s %11s %9s %10s\n", "variant", "threads", "median ms", "GB/s", "vs plain");
  for (const auto& v : vs) {
    const double m = median(v.ms);
    std::printf("  %-28s %7d %11.4f %9.1f %9.2fx\n", v.name.c_str(), v.threads, m, bytes / (m * 1e6), plain / m);
  }
  at::set_num_threads(plain_threads);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 8, steps = 80;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if ((k == "--rounds" || k == "--steps") && i + 1 < argc) (k == "--rounds" ? rounds : steps) = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: accelkit_bench_sgd [--rounds R] [--steps N]\n");
      return 2;
    }
  }
  at::manual_seed(0);
  std::printf("accelkit_bench_sgd: %d rounds, %d timed steps per variant; LibTorch's default threads %d, %u logical cores\n",
              rounds, steps, at::get_num_threads(), std::thread::hardware_concurrency());
  std::printf("GB/s: bytes the update must move (4 B x param, grad, momentum buffer read; param, buffer written) / time\n");
  const auto large = large_params();
  const auto mnist = mnist_params();
  const SGDOptions example = SGDOptions(0.01).momentum(0.5);
  const SGDOptions nesterov = SGDOptions(0.01).momentum(0.9).nesterov(true).weight_decay(5e-4);
  run_set("16 x Linear(1024, 1024)", large, example, "lr 0.01, momentum 0.5", rounds, steps);
  run_set("16 x Linear(1024, 1024)", large, nesterov, "lr 0.01, momentum 0.9, Nesterov, weight decay 5e-4", rounds, steps);
  run_set("MNIST CNN", mnist, example, "lr 0.01, momentum 0.5", rounds, steps * 10);
  run_set("MNIST CNN", mnist, nesterov, "lr 0.01, momentum 0.9, Nesterov, weight decay 5e-4", rounds, steps * 10);
  return 0;
}
