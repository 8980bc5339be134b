// A model's parameters and buffers and LibTorch's CPU generator, saved on construction and
// put back by restore(): the auto-tuner's and the batch-size finder's trials leave no trace.
// Internal to the core.
#pragma once

#include <mutex>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

namespace accelkit {

class ModelSnapshot {
 public:
  // on_host: keep the copies in host memory (a search for the device's memory limit must not
  // hold a second copy of the model on the device).
  explicit ModelSnapshot(torch::nn::Module& m, bool on_host = false) : module_(m) {
    at::NoGradGuard no_grad;
    auto copy = [on_host](const at::Tensor& t) { return on_host ? t.detach().to(at::kCPU, false, true) : t.detach().clone(); };
    for (const auto& p : m.parameters()) params_.push_back(copy(p));
    for (const auto& b : m.buffers()) buffers_.push_back(copy(b));
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    rng_ = gen.get_state();
  }
  void restore(bool rng) {
    at::NoGradGuard no_grad;
    auto params = module_.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      // A trial with master weights left the param in bf16: give it back its own dtype.
      if (params[i].scalar_type() == params_[i].scalar_type()) params[i].copy_(params_[i]);
      else params[i].set_data(params_[i].to(params[i].device(), params_[i].scalar_type(), false, true));
      params[i].mutable_grad() = at::Tensor();
    }
    auto buffers = module_.buffers();
    for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(buffers_[i]);
    if (rng) {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(rng_);
    }
  }

 private:
  torch::nn::Module& module_;
  std::vector<at::Tensor> params_, buffers_;
  at::Tensor rng_;
};

}  // namespace accelkit
