// A short training run through the plugin's plan and optimizer: the loss must halve; its step
// time against plain LibTorch (fp32, torch::optim::AdamW, the same threads) is reported, and in
// the full run must be at least half as fast.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>

#include "accelkit/device_sync.hpp"
#include "accelkit/sdk/optimizer.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "check_util.hpp"

namespace accelkit::conformance::detail {
namespace {

torch::nn::Sequential make_model() {
  return torch::nn::Sequential(torch::nn::Linear(64, 256), torch::nn::ReLU(), torch::nn::Linear(256, 256),
                               torch::nn::ReLU(), torch::nn::Linear(256, 1));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One model's run: its losses and step times.
struct Trained {
  std::vector<double> losses;
  std::vector<double> ms;
  double step_ms() const {  // median, the first 5 steps (warm-up) left out
    return median(std::vector<double>(ms.begin() + std::min<std::ptrdiff_t>(5, std::ptrdiff_t(ms.size())), ms.end()));
  }
};

// Step `s` of one model over fixed batches: the forward under autocast to `dtype` when
// `autocast` (a scope per step, as Runtime::autocast() opens), the loss in fp32 outside it.
void step(const Run& run, torch::nn::Sequential& model, torch::optim::Optimizer& opt, const at::Tensor& x,
          const at::Tensor& y, bool autocast, at::ScalarType dtype, Trained& t) {
  const auto t0 = std::chrono::steady_clock::now();
  opt.zero_grad();
  at::Tensor out;
  {
    compat::AutocastGuard scope(run.dev.type(), autocast, dtype);
    out = model->forward(x);
  }
  auto loss = torch::nn::functional::mse_loss(out.to(at::kFloat), y);
  loss.backward();
  opt.step();
  accelkit::detail::synchronize(run.dev);
  t.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  t.losses.push_back(loss.item<double>());
}

double mean(const std::vector<double>& v, std::size_t from, std::size_t n) {
  double s = 0;
  for (std::size_t i = from; i < from + n; ++i) s += v[i];
  return s / double(n);
}

}  // namespace

void check_training(const Run& run) {
  run.check("training", "a small MLP trained through the plugin's plan and optimizer", [&]() -> CheckResult {
    const int steps = run.options.quick ? 30 : 80;
    // The plan applied; its autocast then opened in a scope per step (the thread-wide state
    // apply() set is off meanwhile: check_device applies the plan again at the end).
    const PrecisionPlan plan = apply_request(run.device, run.options.request);
    const auto type = run.dev.type();
    if (compat::autocast_available(type)) compat::set_autocast_enabled(type, false);
    // A learnable target: a fixed random linear map through tanh.
    const auto w_true = run.randn({64, 1}) / 8.0;
    std::vector<at::Tensor> xs, ys;
    for (int i = 0; i < 8; ++i) {
      xs.push_back(run.randn({128, 64}));
      ys.push_back(at::tanh(at::matmul(xs.back().to(at::kCPU, at::kDouble), w_true.to(at::kCPU, at::kDouble)))
                       .to(run.dev, at::kFloat));
    }
    auto model = make_model(), plain = make_model();
    model->to(run.dev);
    plain->to(run.dev);
    {
      torch::NoGradGuard ng;
      auto src = model->parameters(), dst = plain->parameters();
      for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
    }
    std::shared_ptr<torch::optim::Optimizer> opt;
    std::string which = "torch::optim::AdamW";
    if (run.claims(Capability::fused_adamw)) {
      AdamWConfig c;
      c.lr = 3e-3;
      auto r = run.device.optimizer().value()->create_adamw(model->parameters(), c);
      if (!r.ok()) return fail("create_adamw: " + r.status().message());
      opt = r.value();
      which = "the plugin's AdamW";
    } else {
      opt = std::make_shared<torch::optim::AdamW>(model->parameters(), torch::optim::AdamWOptions(3e-3));
    }
    // Plain LibTorch: no autocast, torch::optim::AdamW, the same threads. The two alternate
    // step by step, so that whatever else the machine does falls on both alike.
    torch::optim::AdamW plain_opt(plain->parameters(), torch::optim::AdamWOptions(3e-3));
    Trained ours, base;
    for (int s = 0; s < steps; ++s) {
      const auto i = std::size_t(s) % xs.size();
      step(run, model, *opt, xs[i], ys[i], plan.autocast, scalar_type(plan.dtype), ours);
      step(run, plain, plain_opt, xs[i], ys[i], false, at::kFloat, base);
    }
    const double speedup = base.step_ms() / ours.step_ms();
    const double start = mean(ours.losses, 0, 5), end = mean(ours.losses, ours.losses.size() - 5, 5);
    // Judged in the full run only, and only against a collapse: on a model this small a plan
    // that is right for real models may well not pay (autocast's casts cost more than they
    // save), but one that halves plain LibTorch's speed is a fault.
    const bool judged = !run.options.quick;
    const std::string timing = "step " + num(ours.step_ms()) + " ms (" + (plan.autocast ? to_string(plan.dtype) : "fp32") +
                               ", " + which + ") vs " + num(base.step_ms()) +
                               " ms plain LibTorch (fp32, torch::optim::AdamW): " + num(speedup) + "x" +
                               (judged ? " (at least 0.5x required)" : ", reported, not judged");
    // Half the starting loss: plain LibTorch gets there in these steps from the same weights.
    if (!(end < 0.5 * start))
      return fail("loss " + num(start) + " -> " + num(end) + " over " + std::to_string(steps) +
                      " steps did not halve (plain LibTorch: " + num(mean(base.losses, 0, 5)) + " -> " +
                      num(mean(base.losses, base.losses.size() - 5, 5)) + "); " + timing,
                  end / start, 0.5);
    if (judged && !(speedup >= 0.5))
      return fail("the plugin's plan and optimizer halve plain LibTorch's speed: " + timing, speedup, 0.5);
    return pass("loss " + num(start) + " -> " + num(end) + " in " + std::to_string(steps) + " steps; " + timing, end / start,
                0.5);
  });
}

}  // namespace accelkit::conformance::detail
