#include "tuning/weight_layout.hpp"

#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>

namespace accelkit::detail {

void WeightLayout::add(torch::nn::Module& module) {
  auto take = [&](torch::nn::Module& m) {
    at::Tensor w;
    if (auto* c = dynamic_cast<torch::nn::Conv2dImpl*>(&m)) w = c->weight;
    else if (auto* t = dynamic_cast<torch::nn::ConvTranspose2dImpl*>(&m)) w = t->weight;
    if (!w.defined() || w.dim() != 4) return;
    for (const at::Tensor& have : weights_)
      if (have.is_same(w)) return;
    weights_.push_back(w);
  };
  take(module);
  for (const auto& m : module.modules(/*include_self=*/false)) take(*m);
}

void WeightLayout::apply(bool channels_last) {
  const auto format = channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  at::NoGradGuard no_grad;
  for (at::Tensor& w : weights_) {
    if (!w.is_contiguous(format)) {
      at::Tensor moved = w.detach().contiguous(format);
      w.set_data(moved);
    }
    if (w.grad().defined() && !w.grad().is_contiguous(format)) w.mutable_grad() = w.grad().contiguous(format);
  }
}

}  // namespace accelkit::detail
