#include "simple_adamw.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include <accelkit/sdk/torch_compat.hpp>

namespace cpu_variant {
namespace {

// A state tensor as the loop reads it: contiguous float (a loaded checkpoint may differ).
at::Tensor settled(const at::Tensor& t) { return t.to(at::kFloat).contiguous(); }

}  // namespace

std::vector<torch::Tensor> SimpleAdamW::checked(std::vector<torch::Tensor> params) {
  for (const auto& p : params)
    if (!p.device().is_cpu() || p.scalar_type() != at::kFloat)
      throw std::invalid_argument(std::string("SimpleAdamW updates float32 CPU parameters only, not ") +
                                  c10::toString(p.scalar_type()) + " on " + p.device().str());
  return params;
}

torch::Tensor SimpleAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(p.device().is_cpu() && p.scalar_type() == at::kFloat && p.is_contiguous(),
                  "SimpleAdamW takes contiguous float32 CPU parameters, got ", p.scalar_type(), " on ", p.device());
      TORCH_CHECK(!p.grad().is_sparse(), "SimpleAdamW does not support sparse gradients");
      auto& slot = state_[accelkit::compat::optimizer_state_key(state_, p)];
      if (!slot) {
        auto st = std::make_unique<torch::optim::AdamWParamState>();
        st->step(0);
        st->exp_avg(torch::zeros_like(p, at::MemoryFormat::Contiguous));
        st->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Contiguous));
        if (o.amsgrad()) st->max_exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Contiguous));
        slot = std::move(st);
      }
      auto& st = static_cast<torch::optim::AdamWParamState&>(*slot);
      st.exp_avg(settled(st.exp_avg()));
      st.exp_avg_sq(settled(st.exp_avg_sq()));
      if (o.amsgrad()) st.max_exp_avg_sq(settled(st.max_exp_avg_sq()));
      st.step(st.step() + 1);

      const auto [beta1, beta2] = o.betas();
      const double bc1 = 1 - std::pow(beta1, st.step());
      const double bc2 = 1 - std::pow(beta2, st.step());
      const float decay = static_cast<float>(1 - o.lr() * o.weight_decay());
      // 1 - beta in double, as torch::optim::AdamW does (1 - float(0.999) is 1.3e-5 off).
      const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
      const float c1 = static_cast<float>(1 - beta1), c2 = static_cast<float>(1 - beta2);
      const float step_size = static_cast<float>(o.lr() / bc1);
      const float inv_sqrt_bc2 = static_cast<float>(1 / std::sqrt(bc2));
      const float eps = static_cast<float>(o.eps());
      const float sign = maximize_ ? -1.0f : 1.0f;
      const bool amsgrad = o.amsgrad();

      const at::Tensor grad = p.grad().to(at::kFloat).contiguous();
      float* w = p.data_ptr<float>();
      const float* g = grad.data_ptr<float>();
      float* m = st.exp_avg().data_ptr<float>();
      float* v = st.exp_avg_sq().data_ptr<float>();
      float* vmax = amsgrad ? st.max_exp_avg_sq().data_ptr<float>() : nullptr;
      at::parallel_for(0, p.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const float gi = sign * g[i];
          m[i] = b1 * m[i] + c1 * gi;
          v[i] = b2 * v[i] + c2 * gi * gi;
          float d = v[i];
          if (amsgrad) d = vmax[i] = std::max(vmax[i], v[i]);
          w[i] = w[i] * decay - step_size * m[i] / (std::sqrt(d) * inv_sqrt_bc2 + eps);
        }
      });
    }
  }
  return loss;
}

}  // namespace cpu_variant
