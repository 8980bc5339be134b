// Fused multi-tensor AdamW for CUDA tensors (built only with a CUDA LibTorch): each step
// enqueues, per param group, device and dtype, one launch of fused_adamw_kernel.cu per 48
// tensors, on LibTorch's current stream of that device.
//
// Math and float rounding as torch::optim::AdamW; param groups, options and per-parameter
// state are AdamW's own types, so checkpoints move both ways between this class and
// torch::optim::AdamW. Params: fp32, bf16 or fp16 with fp32 state (a loaded lower-precision
// state is widened on first use); other dtypes take an unfused ATen path with the same math.
//
// Master weights (master_weights = true; support::MasterWeights): float matrix params become
// bf16 in place at construction, their fp32 values the master; each step reads the bf16 grad
// and the master, updates master and state in fp32 and writes the master's bf16 rounding into
// the param, in the same launch. The model then trains on bf16 weights with no per-step
// casts. save()/load() carry the masters (key "accelkit_master_weights", as on the CPU).
//
// Capturable mode (for whole-step CUDA graph capture): each parameter also gets a float step
// counter on its device, advanced on the device, so a replayed graph uses the right bias
// correction. The host AdamW step count then lags during replays: sync_host_steps() copies
// the device counters back (call it before saving a checkpoint).
#pragma once

#include <torch/optim/adamw.h>

#include "accelkit/sdk/support/master_weights.hpp"

#include <string>
#include <unordered_map>
#include <vector>

namespace accelkit::cuda {

class FusedAdamWCuda : public torch::optim::AdamW {
 public:
  explicit FusedAdamWCuda(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                          torch::optim::AdamWOptions defaults = {}, bool maximize = false,
                          bool master_weights = false);
  explicit FusedAdamWCuda(std::vector<torch::Tensor> params, torch::optim::AdamWOptions defaults = {},
                          bool maximize = false, bool master_weights = false);

  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

  bool master_weights() const { return master_weights_; }
  // The fp32 master copy of a bf16 param (undefined when it has none).
  at::Tensor master_of(const at::Tensor& param) const { return masters_.of(param); }

  bool maximize() const { return maximize_; }
  void set_maximize(bool maximize) { maximize_ = maximize; }

  bool capturable() const { return capturable_; }
  void set_capturable(bool capturable);
  // Copies the device step counters into the AdamW state (capturable mode; no-op otherwise).
  void sync_host_steps();

  std::string implementation() const;

 private:
  bool maximize_;
  bool master_weights_;
  support::MasterWeights masters_;
  bool capturable_ = false;
  std::unordered_map<const void*, at::Tensor> device_steps_;  // TensorImpl* -> float scalar
};

}  // namespace accelkit::cuda
