#include "cuda_captured_step.hpp"

#include <c10/cuda/CUDAGuard.h>

#include <utility>

namespace accelkit::cuda {

CudaCapturedStep::CudaCapturedStep(int device_index, torch::optim::Optimizer& optimizer, std::function<void()> step,
                                   int warmup)
    : device_index_(device_index), graph_(optimizer, std::move(step), warmup) {}

Status CudaCapturedStep::run() noexcept {
  return guarded("cuda training step", [&] {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_index_));
    graph_.run();
  });
}

}  // namespace accelkit::cuda
