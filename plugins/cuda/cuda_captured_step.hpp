// accelkit::CapturedStep over GraphedStep (built only with a CUDA LibTorch): the step runs
// with `device_index` current, so its streams and graph belong to that GPU.
#pragma once

#include <functional>
#include <string>

#include <accelkit/sdk/step_capture.hpp>

#include "graph_step.hpp"

namespace accelkit::cuda {

class CudaCapturedStep final : public CapturedStep {
 public:
  CudaCapturedStep(int device_index, torch::optim::Optimizer& optimizer, std::function<void()> step, int warmup);

  Status run() noexcept override;
  bool captured() const noexcept override { return graph_.captured(); }
  std::string fallback_reason() const override { return graph_.fallback_reason(); }

 private:
  int device_index_;
  GraphedStep graph_;
};

}  // namespace accelkit::cuda
