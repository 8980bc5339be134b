// accelkit_bench_readme_loop: the README's training loop as a user writes it, on the device
// accelkit negotiates, against plain and hand-tuned LibTorch on the same model and data - the
// figure `accelkit bench` cannot give, since there accelkit runs the loop itself. The model is
// accelkit bench's mlp (3 x Linear(W) with ReLU, default W = 8192, batch 512), AdamW lr 1e-4,
// weight decay 1e-2, MSE against a fixed random target. Variants, each its own model copy from
// the same initial weights, alternating every round of `--steps` steps after `--warmup` rounds;
// medians of each round's time per step (synchronised before and after):
//   plain     fp32, torch::optim::AdamW, zero_grad();
//   tuned     hand-tuned LibTorch: bf16 autocast, TF32, at::_fused_adamw_ where LibTorch has it
//             for the device, gradients to none;
//   readme    the README's port: the program's own torch::optim::AdamW given to
//             rt->prepare(model, optimizer), the forward under rt->autocast(), rt->step();
//   master    the same loop with Runtime::make_adamw and AdamWConfig::master_weights (bf16
//             weights, fp32 master in the fused optimizer: docs/training.md), where the device
//             has them.
// Timing only: the same steps' numerics are `accelkit bench --model mlp`'s accuracy check.
//
//   accelkit_bench_readme_loop [--width W] [--batch B] [--steps N] [--rounds R] [--warmup K]
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "accelkit/device_sync.hpp"
#include "accelkit/log.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/sdk/support/aten_fused_adamw.hpp"
#include "bench_timing.hpp"

namespace {

using accelkit::bench_timing::Clock;
using accelkit::bench_timing::median;
using accelkit::bench_timing::ms_since;

torch::nn::Sequential make_mlp(int64_t w) {
  torch::manual_seed(3);
  return torch::nn::Sequential(torch::nn::Linear(w, w), torch::nn::ReLU(), torch::nn::Linear(w, w), torch::nn::ReLU(),
                               torch::nn::Linear(w, w));
}

struct Variant {
  std::string name, what;
  std::function<void()> step;  // one training step
  accelkit::PrecisionPlan plan;  // applied before each round (the runtime's plan is process-wide: TF32)
  std::vector<double> ms;
};

}  // namespace

int main(int argc, char** argv) try {
  int64_t width = 8192, batch = 512;
  int steps = 10, rounds = 7, warmup = 6;  // 6 warm-up rounds: past step tuning's observation
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--width") width = v;
    else if (a == "--batch") batch = v;
    else if (a == "--steps") steps = v;
    else if (a == "--rounds") rounds = v;
    else if (a == "--warmup") warmup = v;
    else throw std::invalid_argument("unknown option " + a + " (--width, --batch, --steps, --rounds, --warmup)");
  }
  if (width <= 0 || batch <= 0 || steps <= 0 || rounds <= 0 || warmup < 0)
    throw std::invalid_argument("--width, --batch, --steps and --rounds must be positive, --warmup not negative");
  accelkit::init_logging(accelkit::LogLevel::warn);
  auto rt = accelkit::Runtime::start({});
  const c10::Device device = rt->device();
  torch::manual_seed(5);
  const auto x = torch::randn({batch, width}).to(device), y = torch::randn({batch, width}).to(device);
  const auto adamw = torch::optim::AdamWOptions(1e-4).weight_decay(1e-2);
  std::vector<Variant> v;

  auto plain_model = make_mlp(width);
  plain_model->to(device);
  auto plain_opt = std::make_shared<torch::optim::AdamW>(plain_model->parameters(), adamw);
  v.push_back({"plain", "fp32, torch::optim::AdamW, zero_grad()", [=]() mutable {
                 plain_opt->zero_grad();
                 auto loss = torch::mse_loss(plain_model->forward(x), y);
                 loss.backward();
                 plain_opt->step();
               },
               {},
               {}});
  v.back().plan.threads = at::get_num_threads();  // plain LibTorch: no TF32, no autocast

  auto tuned_model = make_mlp(width);
  tuned_model->to(device);
  const bool aten_fused = accelkit::support::AtenFusedAdamW::available(device.type());
  std::shared_ptr<torch::optim::Optimizer> tuned_opt =
      aten_fused ? std::shared_ptr<torch::optim::Optimizer>(
                       std::make_shared<accelkit::support::AtenFusedAdamW>(tuned_model->parameters(), adamw))
                 : std::make_shared<torch::optim::AdamW>(tuned_model->parameters(), adamw);
  v.push_back({"tuned", std::string("bf16 autocast, TF32, ") + (aten_fused ? "at::_fused_adamw_" : "torch::optim::AdamW") +
                            ", gradients to none",
               [=]() mutable {
                 accelkit::zero_grad(*tuned_opt);
                 torch::Tensor out;
                 {
                   accelkit::compat::AutocastGuard ac(device.type(), true, at::kBFloat16);
                   out = tuned_model->forward(x);
                 }
                 auto loss = torch::mse_loss(out.to(torch::kFloat), y);
                 loss.backward();
                 tuned_opt->step();
               },
               {},
               {}});
  v.back().plan.threads = at::get_num_threads();
  v.back().plan.tf32 = rt->precision().tf32;  // TF32 where the device has it, as a careful user sets it

  auto readme_model = make_mlp(width);
  torch::optim::AdamW readme_opt(readme_model->parameters(), adamw);
  const accelkit::Adoption adopted = rt->prepare(*readme_model, readme_opt);
  v.push_back({"readme", "rt->prepare(model, optimizer), rt->autocast(), rt->step(): " + adopted.implementation,
               [&, readme_model]() mutable {
                 readme_opt.zero_grad();
                 torch::Tensor out;
                 {
                   auto ac = rt->autocast();
                   out = readme_model->forward(x);
                 }
                 auto loss = torch::mse_loss(out.to(torch::kFloat), y);
                 loss.backward();
                 rt->step(readme_opt);
               },
               rt->precision(),
               {}});

  auto master_model = make_mlp(width);
  rt->prepare(*master_model);
  accelkit::AdamWConfig mc;
  mc.lr = 1e-4;
  mc.master_weights = true;
  std::shared_ptr<torch::optim::Optimizer> master_opt;
  std::string master_note;
  try {
    master_opt = rt->make_adamw(master_model->parameters(), mc).optimizer;
  } catch (const std::exception& e) {
    master_note = e.what();
  }
  if (master_opt)
    v.push_back({"master", "the same loop, make_adamw with AdamWConfig::master_weights", [&, master_model, master_opt]() mutable {
                   accelkit::zero_grad(*master_opt);
                   torch::Tensor out;
                   {
                     auto ac = rt->autocast();
                     out = master_model->forward(x);
                   }
                   auto loss = torch::mse_loss(out.to(torch::kFloat), y);
                   loss.backward();
                   master_opt->step();
                 },
                 rt->precision(),
                 {}});

  std::printf("README loop on %s: mlp 3 x Linear(%lld), batch %lld, AdamW; %d rounds of %d steps after %d\n",
              device.str().c_str(), static_cast<long long>(width), static_cast<long long>(batch), rounds, steps, warmup);
  std::printf("readme: %s (%s)\n", adopted.implementation.c_str(), adopted.why.c_str());
  if (!master_opt) std::printf("master: not run: %s\n", master_note.c_str());
  for (int r = 0; r < warmup + rounds; ++r)
    for (auto& var : v) {
      rt->apply_precision(var.plan);
      accelkit::detail::synchronize(device);
      const auto t = Clock::now();
      for (int s = 0; s < steps; ++s) var.step();
      accelkit::detail::synchronize(device);
      if (r >= warmup) var.ms.push_back(ms_since(t) / steps);
    }
  const auto& st = rt->step_tuning();
  std::printf("step tuning: %s\n", st.why.c_str());
  const double plain = median(v[0].ms), tuned = median(v[1].ms);
  for (const auto& var : v) {
    const double m = median(var.ms);
    std::printf("%-7s %9.3f ms/step  %5.2fx plain  %5.2fx tuned  (%s)\n", var.name.c_str(), m, plain / m, tuned / m,
                var.what.c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "accelkit_bench_readme_loop: %s\n", e.what());
  return 2;
}
