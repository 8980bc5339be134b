// The application API for training code: start accelkit once, then move the model, run
// forward under the negotiated autocast, scale the loss, and step the backend's optimizer.
//
//   auto rt = accelkit::Runtime::start({});          // plugins, settings, device, precision
//   rt->prepare(*model);                              // to the device
//   auto opt = rt->make_adamw(model->parameters(), {});
//   auto scaler = rt->make_loss_scaler();
//   at::Tensor out;
//   { auto ac = rt->autocast(); out = model->forward(x); }   // loss outside: fp32
//   loss = criterion(out.to(at::kFloat), y);
//   scaler.scale(loss).backward();
//   scaler.step(*opt.optimizer);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "accelkit/context.hpp"
#include "accelkit/loss_scaler.hpp"
#include "accelkit/optimizer.hpp"
#include "accelkit/precision.hpp"
#include "accelkit/torch_compat.hpp"

namespace torch::nn { class Module; }

namespace accelkit {

struct OptimizerChoice {
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  std::string implementation;  // "fused AdamW (avx512, 2 threads)" or "torch::optim::AdamW"
  std::string why;             // why this one
};

class Runtime {
 public:
  // Resolves settings, loads plugins, negotiates (throws DeviceUnavailableError when nothing
  // fits), opens the device and applies its precision plan on the calling thread.
  static std::unique_ptr<Runtime> start(const ContextOptions& options);

  Context& context() noexcept { return *context_; }
  const Context& context() const noexcept { return *context_; }
  const std::shared_ptr<Device>& device_handle() const noexcept { return device_; }
  c10::Device device() const noexcept { return torch_device_; }
  const PrecisionPlan& precision() const noexcept { return plan_; }

  // Moves the module's parameters and buffers to the device.
  void prepare(torch::nn::Module& module) const;

  // Autocast with the negotiated dtype for this scope (off when the plan says fp32).
  compat::AutocastGuard autocast() const {
    return compat::AutocastGuard(torch_device_.type(), plan_.autocast, autocast_dtype());
  }
  at::ScalarType autocast_dtype() const;

  // The plugin's fused AdamW when it has one and fused_optimizer is auto/on; torch::optim::AdamW
  // when off or when the plugin has none (fused_optimizer=on then throws: never a silent swap).
  OptimizerChoice make_adamw(const std::vector<at::Tensor>& params, const AdamWConfig& config) const;

  // Dynamic loss scaling when the plan asks for it (fp16), otherwise a pass-through scaler.
  LossScaler make_loss_scaler() const;

 private:
  Runtime() = default;
  std::unique_ptr<Context> context_;
  std::shared_ptr<Device> device_;
  std::shared_ptr<Optimizer> optimizers_;  // null when the plugin has none
  std::string optimizer_absent_reason_;
  c10::Device torch_device_{c10::kCPU};
  PrecisionPlan plan_;
};

// Gradient accumulation over N micro-batches: scale each loss by 1/N, step on every N-th.
class GradAccumulator {
 public:
  explicit GradAccumulator(int micro_batches);
  int micro_batches() const noexcept { return n_; }
  at::Tensor scale(const at::Tensor& loss) const;
  // Call after each micro-batch's backward: true when the optimizer should step now.
  bool boundary() noexcept { return ++count_ % n_ == 0; }

 private:
  int n_;
  long count_ = 0;
};

}  // namespace accelkit
