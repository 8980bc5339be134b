// Fused SGD for CPU: torch::optim::SGD's update (weight decay, momentum with dampening,
// Nesterov) in one pass per element over param, grad and momentum buffer, parallel over
// at::get_num_threads() threads - where torch::optim::SGD makes up to four passes and two
// temporaries per parameter.
//
// The math is torch::optim::SGD's (LibTorch 1.13 and 2.x):
//   d = g + wd*p;  b = momentum*b + (1-dampening)*d (first step: b = d);
//   d = nesterov ? d + momentum*b : b;  p -= lr*d
// with each add-with-alpha one fused multiply-add, as ATen's vectorised kernels compute it, so
// results match torch::optim::SGD to float round-off (bitwise where LibTorch's kernels fuse the
// same way). Options, param groups and state are SGD's own types (SGDParamState's
// momentum_buffer), so checkpoints move both ways between this class and torch::optim::SGD.
//
// Fused: float params with dense float grads, param, grad and buffer contiguous. Anything
// else (another dtype, a strided view, a buffer loaded in another layout) takes the same ATen
// ops as torch::optim::SGD. Sparse grads are refused, as torch::optim::SGD's ops would.
#pragma once

#include <torch/optim/sgd.h>

#include <string>
#include <vector>

namespace accelkit::cpu {

class FusedSGD : public torch::optim::SGD {
 public:
  explicit FusedSGD(std::vector<torch::optim::OptimizerParamGroup> param_groups, torch::optim::SGDOptions defaults);
  explicit FusedSGD(std::vector<torch::Tensor> params, torch::optim::SGDOptions defaults);

  torch::Tensor step(LossClosure closure = nullptr) override;

  // e.g. "fused SGD (avx2, 2 threads)"
  std::string implementation() const;
  // Params the last step updated through ATen's ops instead of the fused loop.
  std::int64_t unfused_last_step() const { return unfused_; }

 private:
  bool avx2_;
  std::int64_t unfused_ = 0;
};

}  // namespace accelkit::cpu
