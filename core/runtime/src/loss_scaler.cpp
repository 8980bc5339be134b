#include "accelkit/loss_scaler.hpp"

#include <stdexcept>

#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

namespace accelkit {

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.init_scale) {
  if (options_.enabled && !(options_.init_scale > 0 && options_.growth_factor > 1 && options_.backoff_factor > 0 &&
                            options_.backoff_factor < 1 && options_.growth_interval > 0))
    throw std::invalid_argument(
        "LossScaler: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, growth_interval > 0");
}

at::Tensor LossScaler::scale(const at::Tensor& loss) const { return options_.enabled ? loss * scale_ : loss; }

bool LossScaler::unscale(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return true;
  if (unscaled_) return !found_inf_;
  const double inv = 1.0 / scale_;
  at::Tensor all_finite;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params()) {
      at::Tensor g = p.grad();
      if (!g.defined()) continue;
      g.mul_(inv);
      at::Tensor finite = at::isfinite(g).all();
      all_finite = all_finite.defined() ? at::logical_and(all_finite, finite) : finite;
    }
  found_inf_ = all_finite.defined() && !all_finite.item<bool>();
  if (agree_) found_inf_ = agree_(found_inf_);
  unscaled_ = true;
  return !found_inf_;
}

bool LossScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  unscale(optimizer);
  const bool stepped = !found_inf_;
  if (stepped) {
    optimizer.step();
    if (++good_steps_ >= options_.growth_interval) {
      scale_ *= options_.growth_factor;
      good_steps_ = 0;
    }
  } else {
    ++skipped_;
    scale_ *= options_.backoff_factor;
    good_steps_ = 0;
  }
  unscaled_ = false;
  found_inf_ = false;
  return stepped;
}

void LossScaler::save(torch::serialize::OutputArchive& archive) const {
  archive.write("loss_scaler.scale", at::scalar_tensor(scale_, at::kDouble));
  archive.write("loss_scaler.good_steps", at::scalar_tensor(good_steps_, at::kLong));
  archive.write("loss_scaler.skipped", at::scalar_tensor(skipped_, at::kLong));
}

void LossScaler::load(torch::serialize::InputArchive& archive) {
  at::Tensor scale, good, skipped;
  archive.read("loss_scaler.scale", scale);
  archive.read("loss_scaler.good_steps", good);
  archive.read("loss_scaler.skipped", skipped);
  scale_ = scale.item<double>();
  good_steps_ = good.item<std::int64_t>();
  skipped_ = skipped.item<std::int64_t>();
  unscaled_ = found_inf_ = false;
}

}  // namespace accelkit
