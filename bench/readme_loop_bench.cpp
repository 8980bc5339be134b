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
  std::function<void()> step;    // one training step
  accelkit::PrecisionPlan plan;  // applied before each round (the runtime's plan is process-wide: TF32)
  std::vector<double> ms;
};

struct Options {
  int64_t width = 8192, batch = 512;
  int steps = 10, rounds = 7, warmup = 6;  // 6 warm-up rounds: past step tuning's observation
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--width") o.width = v;
    else if (a == "--batch") o.batch = v;
    else if (a == "--steps") o.steps = v;
    else if (a == "--rounds") o.rounds = v;
    else if (a == "--warmup") o.warmup = v;
    else throw std::invalid_argument("unknown option " + a + " (--width, --batch, --steps, --rounds, --warmup)");
  }
  if (o.width <= 0 || o.batch <= 0 || o.steps <= 0 || o.rounds <= 0 || o.warmup < 0)
    throw std::invalid_argument("--width, --batch, --steps and --rounds must be positive, --warmup not negative");
  return o;
}

// The four variants on one runtime, each with its own model copy from the same weights.
class LoopBench {
 public:
  explicit LoopBench(const Options& o)
      : o_(o), rt_(accelkit::Runtime::start({})), device_(rt_->device()),
        x_(torch::randn({o.batch, o.width}).to(device_)), y_(torch::randn({o.batch, o.width}).to(device_)),
        adamw_(torch::optim::AdamWOptions(1e-4).weight_decay(1e-2)), readme_opt_(make_readme()) {
    add_plain();
    add_tuned();
    add_readme();
    add_master();
  }

  void run() {
    std::printf("README loop on %s: mlp 3 x Linear(%lld), batch %lld, AdamW; %d rounds of %d steps after %d\n",
                device_.str().c_str(), static_cast<long long>(o_.width), static_cast<long long>(o_.batch), o_.rounds,
                o_.steps, o_.warmup);
    std::printf("readme: %s (%s)\n", adopted_.implementation.c_str(), adopted_.why.c_str());
    if (!master_note_.empty()) std::printf("master: not run: %s\n", master_note_.c_str());
    for (int r = 0; r < o_.warmup + o_.rounds; ++r)
      for (auto& var : v_) {
        rt_->apply_precision(var.plan);
        accelkit::detail::synchronize(device_);
        const auto t = Clock::now();
        for (int s = 0; s < o_.steps; ++s) var.step();
        accelkit::detail::synchronize(device_);
        if (r >= o_.warmup) var.ms.push_back(ms_since(t) / o_.steps);
      }
    std::printf("step tuning: %s\n", rt_->step_tuning().why.c_str());
    const double plain = median(v_[0].ms), tuned = median(v_[1].ms);
    for (const auto& var : v_) {
      const double m = median(var.ms);
      std::printf("%-7s %9.3f ms/step  %5.2fx plain  %5.2fx tuned  (%s)\n", var.name.c_str(), m, plain / m, tuned / m,
                  var.what.c_str());
    }
  }

 private:
  torch::nn::Sequential on_device() {
    auto m = make_mlp(o_.width);
    m->to(device_);
    return m;
  }

  // The README's port keeps the program's own optimizer, made before the runtime adopts it.
  std::unique_ptr<torch::optim::AdamW> make_readme() {
    readme_model_ = make_mlp(o_.width);
    auto opt = std::make_unique<torch::optim::AdamW>(readme_model_->parameters(), adamw_);
    adopted_ = rt_->prepare(*readme_model_, *opt);
    return opt;
  }

  void add_plain() {
    auto model = on_device();
    auto opt = std::make_shared<torch::optim::AdamW>(model->parameters(), adamw_);
    v_.push_back({"plain", "fp32, torch::optim::AdamW, zero_grad()",
                  [this, model, opt]() mutable {
                    opt->zero_grad();
                    torch::mse_loss(model->forward(x_), y_).backward();
                    opt->step();
                  },
                  {},
                  {}});
    v_.back().plan.threads = at::get_num_threads();  // plain LibTorch: no TF32, no autocast
  }

  void add_tuned() {
    auto model = on_device();
    const bool fused = accelkit::support::AtenFusedAdamW::available(device_.type());
    std::shared_ptr<torch::optim::Optimizer> opt =
        fused ? std::shared_ptr<torch::optim::Optimizer>(
                    std::make_shared<accelkit::support::AtenFusedAdamW>(model->parameters(), adamw_))
              : std::make_shared<torch::optim::AdamW>(model->parameters(), adamw_);
    v_.push_back({"tuned",
                  std::string("bf16 autocast, TF32, ") + (fused ? "at::_fused_adamw_" : "torch::optim::AdamW") +
                      ", gradients to none",
                  [this, model, opt]() mutable {
                    accelkit::zero_grad(*opt);
                    torch::Tensor out;
                    {
                      accelkit::compat::AutocastGuard ac(device_.type(), true, at::kBFloat16);
                      out = model->forward(x_);
                    }
                    torch::mse_loss(out.to(torch::kFloat), y_).backward();
                    opt->step();
                  },
                  {},
                  {}});
    v_.back().plan.threads = at::get_num_threads();
    v_.back().plan.tf32 = rt_->precision().tf32;  // TF32 where the device has it, as a careful user sets it
  }

  void add_readme() {
    v_.push_back({"readme", "rt->prepare(model, optimizer), rt->autocast(), rt->step(): " + adopted_.implementation,
                  [this]() {
                    readme_opt_->zero_grad();
                    torch::Tensor out;
                    {
                      auto ac = rt_->autocast();
                      out = readme_model_->forward(x_);
                    }
                    torch::mse_loss(out.to(torch::kFloat), y_).backward();
                    rt_->step(*readme_opt_);
                  },
                  rt_->precision(),
                  {}});
  }

  void add_master() {
    auto model = make_mlp(o_.width);
    rt_->prepare(*model);
    accelkit::AdamWConfig mc;
    mc.lr = 1e-4;
    mc.master_weights = true;
    std::shared_ptr<torch::optim::Optimizer> opt;
    try {
      opt = rt_->make_adamw(model->parameters(), mc).optimizer;
    } catch (const std::exception& e) {
      master_note_ = e.what();
      return;
    }
    v_.push_back({"master", "the same loop, make_adamw with AdamWConfig::master_weights",
                  [this, model, opt]() mutable {
                    accelkit::zero_grad(*opt);
                    torch::Tensor out;
                    {
                      auto ac = rt_->autocast();
                      out = model->forward(x_);
                    }
                    torch::mse_loss(out.to(torch::kFloat), y_).backward();
                    opt->step();
                  },
                  rt_->precision(),
                  {}});
  }

  Options o_;
  std::unique_ptr<accelkit::Runtime> rt_;
  c10::Device device_;
  torch::Tensor x_, y_;
  torch::optim::AdamWOptions adamw_;
  torch::nn::Sequential readme_model_{nullptr};
  accelkit::Adoption adopted_;
  std::unique_ptr<torch::optim::AdamW> readme_opt_;
  std::string master_note_;
  std::vector<Variant> v_;
};

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  accelkit::init_logging(accelkit::LogLevel::warn);
  torch::manual_seed(5);
  LoopBench(o).run();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "accelkit_bench_readme_loop: %s\n", e.what());
  return 2;
}
