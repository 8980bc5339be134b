#include "accelkit/runtime.hpp"

#include <stdexcept>

#include <spdlog/spdlog.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include "accelkit/device.hpp"

namespace accelkit {

namespace {
std::string origin_of(const Settings& s, const char* key) {
  const Effective& e = s.get(key);
  return e.source.empty() ? to_string(e.origin) : e.source;
}
}  // namespace

std::unique_ptr<Runtime> Runtime::start(const ContextOptions& options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->context_ = Context::create(options);
  rt->device_ = rt->context_->open_selected();
  const DeviceInfo& info = rt->device_->info();
  rt->torch_device_ = c10::Device(info.torch_device);

  const Settings& s = rt->context_->settings();
  auto precision = rt->device_->precision();
  if (!precision.ok()) throw std::runtime_error(info.id + ": no precision rules: " + precision.status().message());
  PrecisionRequest request;
  request.precision = s.str("precision");
  request.tf32 = s.str("tf32");
  request.threads = static_cast<int>(s.integer("threads"));
  auto plan = precision.value()->plan(request);
  if (!plan.ok())
    throw DeviceUnavailableError("precision '" + request.precision + "' (from " + origin_of(s, "precision") +
                                 "), tf32 '" + request.tf32 + "' on " + info.id + ": " + plan.status().message());
  rt->plan_ = plan.value();
  if (Status st = precision.value()->apply(rt->plan_); !st.is_ok())
    throw std::runtime_error(info.id + ": applying the precision plan failed: " + st.message());

  auto optimizers = rt->device_->optimizer();
  if (optimizers.ok() && optimizers.value()) {
    rt->optimizers_ = optimizers.value();
  } else {
    rt->optimizer_absent_reason_ = optimizers.ok() ? "the plugin returned none" : optimizers.status().message();
  }
  return rt;
}

at::ScalarType Runtime::autocast_dtype() const {
  if (plan_.dtype == "bf16") return at::kBFloat16;
  if (plan_.dtype == "fp16") return at::kHalf;
  return at::kFloat;
}

void Runtime::prepare(torch::nn::Module& module) const { module.to(torch_device_); }

OptimizerChoice Runtime::make_adamw(const std::vector<at::Tensor>& params, const AdamWConfig& c) const {
  const Settings& s = context_->settings();
  const std::string fused = s.str("fused_optimizer");
  const std::string device_id = device_->info().id;
  if (fused != "off" && optimizers_) {
    auto made = optimizers_->create_adamw(params, c);
    if (made.ok() && made.value())
      return {made.value(), optimizers_->implementation(), "fused_optimizer = " + fused + " and " + device_id + " has one"};
    if (fused == "on")
      throw std::runtime_error("fused_optimizer = on (from " + origin_of(s, "fused_optimizer") + ") but " + device_id +
                               " could not create it: " + made.status().message());
    spdlog::warn("{}: fused AdamW unavailable ({}); using torch::optim::AdamW", device_id, made.status().message());
  } else if (fused == "on") {
    throw std::runtime_error("fused_optimizer = on (from " + origin_of(s, "fused_optimizer") + ") but " + device_id +
                             " has no fused optimizer: " + optimizer_absent_reason_);
  }
  auto options = torch::optim::AdamWOptions(c.lr)
                     .betas(std::make_tuple(c.beta1, c.beta2))
                     .eps(c.eps)
                     .weight_decay(c.weight_decay)
                     .amsgrad(c.amsgrad);
  if (c.maximize) throw std::invalid_argument("torch::optim::AdamW has no 'maximize' option in this LibTorch");
  auto opt = std::make_shared<torch::optim::AdamW>(params, options);
  std::string why = fused == "off" ? "fused_optimizer = off (from " + origin_of(s, "fused_optimizer") + ")"
                                   : device_id + " has no fused optimizer: " + optimizer_absent_reason_;
  return {opt, "torch::optim::AdamW", why};
}

LossScaler Runtime::make_loss_scaler() const {
  LossScalerOptions o;
  o.enabled = plan_.loss_scaling;
  return LossScaler(o);
}

GradAccumulator::GradAccumulator(int micro_batches) : n_(micro_batches) {
  if (n_ < 1) throw std::invalid_argument("gradient accumulation needs at least 1 micro-batch");
}

at::Tensor GradAccumulator::scale(const at::Tensor& loss) const { return n_ == 1 ? loss : loss / n_; }

}  // namespace accelkit
