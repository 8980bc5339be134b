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
//
// Master weights (master_weights = true): every float matrix param (2 or more dimensions:
// linear, convolution and embedding weights) is converted to bfloat16 in place at
// construction (set_data, as Module::to does; a grad it already has is converted too) and its
// fp32 values are kept as a master copy, without copying when the layout allows. Vectors
// (biases, norm scales) stay float with the plain fused update: they are a tiny share of the
// bytes, and norms run in fp32 (LibTorch 1.13's CPU autocast leaves layer_norm alone, which
// refuses an fp32 input with a bf16 weight).
// Each step then reads the bfloat16 grad and the master, updates master and state in fp32 and
// writes the master's bfloat16 rounding into the param: the forward and backward run on
// bfloat16 weights with no casts, and the weights keep fp32 precision across steps. The
// bytes per element are the same as for an fp32 param (28, or 32 with amsgrad). A bfloat16
// param (given or added later) gets its master from its own value. save() writes the masters
// next to AdamW's state (key "accelkit_master_weights", by parameter position); load() reads
// them, and where a checkpoint has none (a torch::optim::AdamW one) restarts them from the
// bfloat16 params with a warning.
#pragma once

#include <torch/optim/adamw.h>

#include "accelkit/sdk/support/master_weights.hpp"

#include <string>
#include <unordered_map>
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
                      torch::optim::AdamWOptions defaults = {}, bool maximize = false,
                      bool master_weights = false);
  explicit FusedAdamW(std::vector<torch::Tensor> params, torch::optim::AdamWOptions defaults = {},
                      bool maximize = false, bool master_weights = false);

  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

  bool master_weights() const { return master_weights_; }
  // The fp32 master copy of a bfloat16 param (undefined when it has none).
  at::Tensor master_of(const at::Tensor& param) const;

  // Python's maximize: ascend, i.e. use -grad. Not part of AdamW checkpoints.
  bool maximize() const { return maximize_; }
  void set_maximize(bool maximize) { maximize_ = maximize; }

  AdamWIsa isa() const { return isa_; }
  // Throws if this CPU cannot run the path.
  void set_isa(AdamWIsa isa);

  // e.g. "fused AdamW (avx512, 2 threads)", "... bf16 weights + fp32 master)"
  std::string implementation() const;

  // The checkpoint key of the master copies.
  static constexpr const char* kMasterArchiveKey = support::MasterWeights::kArchiveKey;

 private:
  void adopt_master_weights();
  bool maximize_;
  bool master_weights_;
  AdamWIsa isa_;
  support::MasterWeights masters_;
};

}  // namespace accelkit::cpu
