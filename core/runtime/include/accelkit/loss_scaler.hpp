// Dynamic loss scaling for fp16 training (LibTorch's C++ API has no GradScaler): scale the
// loss, unscale the gradients, skip steps whose gradients hold inf/nan, grow the scale after
// `growth_interval` clean steps and back it off on overflow. Its state goes into checkpoints.
#pragma once

#include <cstdint>
#include <functional>

#include <torch/types.h>

namespace torch::optim { class Optimizer; }
namespace torch::serialize { class OutputArchive; class InputArchive; }

namespace accelkit {

struct LossScalerOptions {
  bool enabled = true;
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {});

  bool enabled() const noexcept { return options_.enabled; }
  double scale_value() const noexcept { return scale_; }
  std::int64_t skipped_steps() const noexcept { return skipped_; }

  // loss * scale (the loss itself when disabled).
  at::Tensor scale(const at::Tensor& loss) const;
  // Divides every gradient of `optimizer` by the scale, once per step; returns false when any
  // gradient holds inf or nan.
  bool unscale(torch::optim::Optimizer& optimizer);
  // unscale() if not done yet, step unless gradients were non-finite, update the scale.
  // Returns whether the optimizer stepped.
  bool step(torch::optim::Optimizer& optimizer);

  // Where several processes train one model (DataParallel::attach): `agree` turns this
  // process's found-inf flag into the one every process acts on (their maximum), so all skip
  // the same steps. Empty: this process's own flag.
  void set_found_inf_agreement(std::function<bool(bool)> agree) { agree_ = std::move(agree); }

  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive);

 private:
  LossScalerOptions options_;
  double scale_;
  std::int64_t good_steps_ = 0;
  std::int64_t skipped_ = 0;
  bool unscaled_ = false;
  bool found_inf_ = false;
  std::function<bool(bool)> agree_;
};

}  // namespace accelkit
