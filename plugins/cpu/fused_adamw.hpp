// Fused AdamW for CPU: one vectorised pass per element over param, grad, exp_avg and
// exp_avg_sq (and max_exp_avg_sq with amsgrad), parallel over at::get_num_threads() threads.
//
// The math is torch::optim::AdamW's (LibTorch 1.13):
//   p *= 1 - lr*wd;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;  (amsgrad: vmax = max(vmax, v))
//   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// with the same float rounding of every scalar, so results match it to float round-off.
// Param groups, options and per-parameter state are AdamW's own types, so checkpoints move
// both ways between this class and torch::optim::AdamW.
//
// Params: float or bfloat16 on the CPU, any layout. bfloat16 params keep float state (a
// loaded bfloat16 state is widened on first use); their grads are expected in the param's
// dtype (others are converted). Other dtypes take an unfused ATen fallback with the same
// math. Sparse grads are an error, as in LibTorch.
#pragma once

#include <torch/optim/adamw.h>

#include <string>
#include <vector>

namespace accelkit::cpu {

enum class AdamWIsa { scalar, avx2, avx512 };

const char* adamw_isa_name(AdamWIsa isa);
// Whether this CPU can run the path (scalar: always).
bool adamw_isa_supported(AdamWIsa isa);
// The best supported path, unless ACCELKIT_ADAMW_ISA=scalar|avx2|avx512 asks for another
// (an unknown name throws; an unsupported one warns and takes the best).
AdamWIsa adamw_default_isa();

class FusedAdamW : public torch::optim::AdamW {
 public:
  explicit FusedAdamW(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                      torch::optim::AdamWOptions defaults = {}, bool maximize = false);
  explicit FusedAdamW(std::vector<torch::Tensor> params, torch::optim::AdamWOptions defaults = {},
                      bool maximize = false);

  torch::Tensor step(LossClosure closure = nullptr) override;

  // Python's maximize: ascend, i.e. use -grad. Not part of AdamW checkpoints.
  bool maximize() const { return maximize_; }
  void set_maximize(bool maximize) { maximize_ = maximize; }

  AdamWIsa isa() const { return isa_; }
  // Throws if this CPU cannot run the path.
  void set_isa(AdamWIsa isa);

  // e.g. "fused AdamW (avx512, 2 threads)"
  std::string implementation() const;

 private:
  bool maximize_;
  AdamWIsa isa_;
};

}  // namespace accelkit::cpu
