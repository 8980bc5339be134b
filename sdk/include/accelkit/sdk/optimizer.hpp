// Optimizer: the factory of a plugin's own optimizer implementations (fused kernels), created as
// torch::optim::Optimizer objects so training code needs no other type.
//
// Ownership: the returned optimizer is owned by the caller; the host keeps the plugin loaded
// while it lives. Thread-safety: create_adamw may be called from any one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accelkit/sdk/status.hpp"

namespace at { class Tensor; }
namespace torch::optim { class Optimizer; }

namespace accelkit {

// Same meaning and defaults as torch::optim::AdamWOptions.
struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  // Mixed-precision master weights (Capability::master_weights): the optimizer converts the
  // fp32 matrix parameters it is given (2+ dimensions; biases and norm scales stay fp32) to
  // bf16 in place, so the model trains on bf16 weights with no per-step weight casts, and
  // keeps their fp32 values as a master copy it updates, saves and loads with its state. A
  // plugin without it must refuse (StatusCode::not_supported).
  bool master_weights = false;
  // Which of the plugin's AdamW implementations (Optimizer::adamw_implementations) to create:
  // its name, or "" for the plugin's default. An unknown name is refused with
  // StatusCode::invalid_argument. Since ABI 3.0.
  std::string implementation;
};

// Same meaning as torch::optim::SGDOptions (which has no default lr; pytorch/examples' MNIST
// uses 0.01). Since ABI 8.0.
struct SGDConfig {
  double lr = 1e-2;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// One AdamW implementation a plugin can create on its device. Since ABI 3.0.
struct AdamWImplementation {
  std::string name;         // short and stable, [a-z0-9-]+: "fused-avx512", "aten-fused"
  std::string description;  // one line: "fused AdamW (avx512, 2 threads)"
  bool master_weights = false;  // whether it takes AdamWConfig::master_weights
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One line saying which implementation this is ("fused AdamW, AVX-512, 16 threads").
  virtual std::string implementation() const = 0;
  // The AdamW implementations this plugin can create on its device, its default first. When
  // there are several, the host times them on the device once per machine and versions (the
  // fastest wins; accelkit report shows the figures) and names the winner in
  // AdamWConfig::implementation. The default lists one, described by implementation().
  // Since ABI 3.0.
  virtual std::vector<AdamWImplementation> adamw_implementations() const {
    return {AdamWImplementation{"default", implementation(), false}};
  }
  // An AdamW over `params` whose state is compatible with torch::optim::AdamW checkpoints
  // (with master_weights, the checkpoint also holds the master copy).
  virtual Result<std::shared_ptr<torch::optim::Optimizer>> create_adamw(
      const std::vector<at::Tensor>& params, const AdamWConfig& config) noexcept = 0;
  // An SGD (momentum, dampening, Nesterov, weight decay) over `params` whose options and
  // state are torch::optim::SGD's (SGDOptions, SGDParamState), so checkpoints move both ways.
  // A plugin that offers one lists Capability::fused_sgd. Since ABI 8.0.
  virtual Result<std::shared_ptr<torch::optim::Optimizer>> create_sgd(const std::vector<at::Tensor>& params,
                                                                      const SGDConfig& config) noexcept {
    (void)params;
    (void)config;
    return Status(StatusCode::not_supported, "this plugin's optimizer has no fused SGD");
  }
};

}  // namespace accelkit
