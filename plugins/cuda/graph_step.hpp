// Whole-training-step CUDA graph capture (built only with a CUDA LibTorch): the C++ form of
// torch.compile's launch-overhead reduction.
//
// The step function runs forward, backward and optimizer.step() on static tensors: inputs
// and targets live in tensors the caller refills (copy_) before each run(), never replaces.
// The first `warmup` runs are eager on a side stream (LibTorch, cuBLAS and the optimizer
// state settle); the next one is captured into a graph and replayed from then on.
//
// When capture is impossible - the optimizer would bake its step count into the graph (only
// FusedAdamWCuda in capturable mode advances on the device), an op syncs with the host or is
// not capturable, shapes change - the capture is abandoned, the step runs eagerly from then
// on, and fallback_reason() says why. A step that failed during capture is re-run eagerly, so
// no step is lost or applied twice.
#pragma once

#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>

namespace at::cuda { struct CUDAGraph; }

namespace accelkit::cuda {

class GraphedStep {
 public:
  using StepFn = std::function<void()>;

  GraphedStep(torch::optim::Optimizer& optimizer, StepFn step, int warmup = 3);
  ~GraphedStep();
  GraphedStep(const GraphedStep&) = delete;
  GraphedStep& operator=(const GraphedStep&) = delete;

  // One training step: eager (warm-up or fallback), capture, or replay.
  void run();

  bool captured() const noexcept { return graph_ != nullptr; }
  bool fell_back() const noexcept { return !fallback_reason_.empty(); }
  // Why the step runs eagerly; empty while capture is still possible or done.
  const std::string& fallback_reason() const noexcept { return fallback_reason_; }
  long replays() const noexcept { return replays_; }

 private:
  void run_eager_on_side_stream();
  void try_capture();

  torch::optim::Optimizer& optimizer_;
  StepFn step_;
  int warmup_;
  int runs_ = 0;
  long replays_ = 0;
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  std::string fallback_reason_;
};

}  // namespace accelkit::cuda
