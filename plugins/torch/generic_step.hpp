// GenericCapturedStep: a whole training step recorded through LibTorch's device-generic graph
// interface (at::accelerator::Graph over the implementation the device's backend registered,
// LibTorch 2.12+) and replayed, with the CUDA plugin's life and fallbacks (step_capture.hpp):
// `warmup` eager calls, then one call that captures and replays once, then replays; a capture
// that fails is abandoned, that call's step is run eagerly (none lost, none twice) and the step
// runs eagerly from then on with the reason.
//
// Which optimizers: a replay repeats the recorded device work with the host values of the
// capture, so an optimizer whose update reads host-side state that changes every step
// (torch::optim's Adam and AdamW count steps on the host for the bias correction) is refused
// with that reason. torch::optim::SGD (and what derives from it) keeps its state in device
// tensors and is captured; a schedule that changes a group's learning rate after the capture
// ends the replays (the recorded rate would be wrong), with the reason.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "accelkit/sdk/step_capture.hpp"
#include "accelkit/sdk/torch_compat_accelerator.hpp"

namespace accelkit::torch_generic {

class GenericCapturedStep final : public CapturedStep {
 public:
  GenericCapturedStep(torch::optim::Optimizer& optimizer, std::function<void()> step, int warmup);
  Status run() noexcept override;
  bool captured() const noexcept override { return graph_ != nullptr && fallback_.empty(); }
  std::string fallback_reason() const override { return fallback_; }

  // Why `optimizer` cannot be recorded, or "" when it can.
  static std::string refusal(const torch::optim::Optimizer& optimizer);

 private:
  std::vector<double> learning_rates() const;
  void try_capture();

  torch::optim::Optimizer& optimizer_;
  std::function<void()> step_;
  int warmup_;
  int runs_ = 0;
  std::unique_ptr<compat::AcceleratorGraph> graph_;
  std::vector<double> captured_lrs_;
  std::string fallback_;
};

}  // namespace accelkit::torch_generic
