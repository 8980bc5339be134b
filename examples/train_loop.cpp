// A complete training loop on whatever accelerator accelkit negotiates: device, autocast,
// loss scaling, the backend's (fused) AdamW, and gradient accumulation.
//
//   accelkit_example_train [settings.toml]      (ACCELKIT_DEVICE, ACCELKIT_PRECISION, ... work too)
#include <iostream>

#include <torch/torch.h>

#include "accelkit/accelkit.hpp"
#include "accelkit/runtime.hpp"

int main(int argc, char** argv) try {
  accelkit::init_logging(accelkit::LogLevel::warn);
  accelkit::ContextOptions options;
  if (argc > 1) options.settings.config_path = argv[1];
  auto rt = accelkit::Runtime::start(options);  // plugins, settings, device, precision
  std::cout << "device " << rt->device_handle()->info().id << ", precision " << to_string(rt->precision().dtype) << '\n';

  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(64, 256), torch::nn::GELU(), torch::nn::Linear(256, 256),
                              torch::nn::GELU(), torch::nn::Linear(256, 1));
  rt->prepare(*model);  // to the device
  // The task: y = sum(sin(x)), fresh samples every micro-batch.
  auto batch = [&rt] {
    auto x = torch::randn({128, 64}).to(rt->device());
    return std::make_pair(x, x.sin().sum(1, /*keepdim=*/true));
  };
  accelkit::AdamWConfig adamw;
  adamw.lr = 2e-3;

  // Profile auto (ACCELKIT_PROFILE=auto): time the candidate settings on this model, or take
  // the cached decision; otherwise this changes nothing.
  accelkit::TuneProblem tune;
  tune.model = model.ptr().get();
  tune.forward = [&model](const torch::Tensor& in) { return model->forward(in); };
  tune.loss = [](const torch::Tensor& out, const torch::Tensor& y) { return torch::mse_loss(out, y); };
  std::tie(tune.input, tune.target) = batch();
  tune.adamw = adamw;
  if (auto d = accelkit::autotune(*rt, tune); d.origin != "settings")
    std::cout << "auto-tune: " << d.chosen.label() << " (" << d.origin << ")\n";
  auto opt = rt->make_adamw(model->parameters(), adamw);
  std::cout << "optimizer " << opt.implementation << " (" << opt.why << ")\n";
  auto scaler = rt->make_loss_scaler();      // dynamic loss scaling for fp16, else a pass-through
  accelkit::GradAccumulator accumulate(2);   // 2 micro-batches per optimizer step

  const int steps = 300;
  double first = 0, last = 0;
  for (int step = 1; step <= steps; ++step) {
    accelkit::zero_grad(*opt.optimizer);  // gradients to none: no memset, no accumulate pass
    double step_loss = 0;
    for (int micro = 0; micro < accumulate.micro_batches(); ++micro) {
      auto [x, y] = batch();
      torch::Tensor loss;
      {
        auto autocast = rt->autocast();  // forward in the negotiated precision
        loss = torch::mse_loss(model->forward(x).to(torch::kFloat), y);
      }
      scaler.scale(accumulate.scale(loss)).backward();
      if (accumulate.boundary()) scaler.step(*opt.optimizer);  // unscale, skip on inf/nan, step
      step_loss += loss.item<double>() / accumulate.micro_batches();
    }
    if (step == 1) first = step_loss;
    last = step_loss;
    if (step % 50 == 0) std::cout << "step " << step << "  loss " << step_loss << '\n';
  }
  std::cout << "loss " << first << " -> " << last << (scaler.enabled() ? ", skipped steps " : "")
            << (scaler.enabled() ? std::to_string(scaler.skipped_steps()) : "") << '\n';
  return last < first ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "accelkit_example_train: " << e.what() << '\n';
  return 1;
}
