// SimpleAdamW: torch::optim::AdamW's math in one pass per parameter (a plain loop over float
// data, split across LibTorch's intra-op threads). Options and per-parameter state are
// AdamW's own types, so checkpoints move both ways between the two classes.
// Params: contiguous float32 on the CPU.
#pragma once

#include <torch/optim/adamw.h>

#include <vector>

namespace cpu_variant {

class SimpleAdamW : public torch::optim::AdamW {
 public:
  // Refuses (std::invalid_argument) parameters that are not float32 CPU tensors: its loop
  // updates those only, and saying so at creation lets the host use another optimizer.
  SimpleAdamW(std::vector<torch::Tensor> params, torch::optim::AdamWOptions options, bool maximize)
      : torch::optim::AdamW(checked(std::move(params)), options), maximize_(maximize) {}

  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  static std::vector<torch::Tensor> checked(std::vector<torch::Tensor> params);
  bool maximize_;
};

}  // namespace cpu_variant
