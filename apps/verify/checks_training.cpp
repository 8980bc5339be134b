// A short training run through the plugin's plan and optimizer: the loss must fall; its step
// time against plain LibTorch (fp32, torch::optim::AdamW, the same threads) is reported.
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

struct Trained {
  std::vector<double> losses;
  double step_ms = 0;  // median of the steps after the first 5
};

// `steps` steps over fixed batches; the forward under autocast to `dtype` when `autocast` (a
// scope per step, as Runtime::autocast() opens), the loss in fp32 outside it.
Trained train(const Run& run, torch::nn::Sequential& model, torch::optim::Optimizer& opt, const std::vector<at::Tensor>& xs,
              const std::vector<at::Tensor>& ys, int steps, bool autocast, at::ScalarType dtype) {
  Trained t;
  std::vector<double> ms;
  for (int s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    const auto& x = xs[std::size_t(s) % xs.size()];
    at::Tensor out;
    {
      compat::AutocastGuard scope(run.dev.type(), autocast, dtype);
      out = model->forward(x);
    }
    auto loss = torch::nn::functional::mse_loss(out.to(at::kFloat), ys[std::size_t(s) % ys.size()]);
    loss.backward();
    opt.step();
    accelkit::detail::synchronize(run.dev);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    t.losses.push_back(loss.item<double>());
  }
  ms.erase(ms.begin(), ms.begin() + std::min<std::ptrdiff_t>(5, std::ptrdiff_t(ms.size())));
  t.step_ms = median(ms);
  return t;
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
    const Trained ours = train(run, model, *opt, xs, ys, steps, plan.autocast, scalar_type(plan.dtype));
    // Plain LibTorch: no autocast, torch::optim::AdamW, the same threads.
    torch::optim::AdamW plain_opt(plain->parameters(), torch::optim::AdamWOptions(3e-3));
    const Trained base = train(run, plain, plain_opt, xs, ys, steps, false, at::kFloat);
    const double start = mean(ours.losses, 0, 5), end = mean(ours.losses, ours.losses.size() - 5, 5);
    const std::string timing = "step " + num(ours.step_ms) + " ms (" + (plan.autocast ? to_string(plan.dtype) : "fp32") +
                               ", " + which + ") vs " + num(base.step_ms) +
                               " ms plain LibTorch (fp32, torch::optim::AdamW): " + num(base.step_ms / ours.step_ms) +
                               "x, reported, not judged";
    // Half the starting loss: plain LibTorch gets there in these steps from the same weights.
    if (!(end < 0.5 * start))
      return fail("loss " + num(start) + " -> " + num(end) + " over " + std::to_string(steps) +
                      " steps did not halve (plain LibTorch: " + num(mean(base.losses, 0, 5)) + " -> " +
                      num(mean(base.losses, base.losses.size() - 5, 5)) + "); " + timing,
                  end / start, 0.5);
    return pass("loss " + num(start) + " -> " + num(end) + " in " + std::to_string(steps) + " steps; " + timing, end / start,
                0.5);
  });
}

}  // namespace accelkit::conformance::detail
