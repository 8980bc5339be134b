#include "fused_sgd.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <unordered_set>

#include "accelkit/sdk/torch_compat.hpp"
#include "fused_adamw.hpp"
#include "fused_sgd_kernel.hpp"

namespace accelkit::cpu {

using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

namespace {

constexpr std::int64_t kGrain = 1 << 15;  // elements per task: well above a thread's start cost

bool use_avx2() {
#if defined(__x86_64__) || defined(_M_X64)
  const AdamWIsa isa = adamw_default_isa();  // ACCELKIT_ADAMW_ISA=scalar forces the portable loop here too
  return isa != AdamWIsa::scalar && adamw_isa_supported(AdamWIsa::avx2);
#else
  return false;
#endif
}

// torch::optim::SGD's own operations for one param: the path for what the loop does not take.
void reference_update(at::Tensor& p, const SGDOptions& o, SGDParamState* state, bool* created,
                      std::unique_ptr<SGDParamState>* fresh) {
  at::Tensor d_p = p.grad().data();
  if (o.weight_decay() != 0) d_p = d_p.add(p.data(), o.weight_decay());
  if (o.momentum() != 0) {
    at::Tensor buf;
    if (!state) {
      buf = torch::clone(d_p).detach();
      *fresh = std::make_unique<SGDParamState>();
      (*fresh)->momentum_buffer(buf);
      *created = true;
    } else {
      buf = state->momentum_buffer();
      buf.mul_(o.momentum()).add_(d_p, 1 - o.dampening());
    }
    d_p = o.nesterov() ? d_p.add(buf, o.momentum()) : buf;
  }
  p.data().add_(d_p, -1 * o.lr());
}

}  // namespace

FusedSGD::FusedSGD(std::vector<torch::optim::OptimizerParamGroup> param_groups, SGDOptions defaults)
    : torch::optim::SGD(std::move(param_groups), std::move(defaults)), avx2_(use_avx2()) {}

FusedSGD::FusedSGD(std::vector<torch::Tensor> params, SGDOptions defaults)
    : torch::optim::SGD(std::move(params), std::move(defaults)), avx2_(use_avx2()) {}

std::string FusedSGD::implementation() const {
  const int n = at::get_num_threads();
  return std::string("fused SGD (") + (avx2_ ? "avx2" : "scalar") + ", " + std::to_string(n) +
         (n == 1 ? " thread)" : " threads)");
}

torch::Tensor FusedSGD::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  std::vector<detail::SGDSpan> spans;
  std::unordered_set<const void*> seen;
  unfused_ = 0;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const SGDOptions&>(group.options());
    for (auto& p : group.params()) {
      const auto& grad = p.grad();
      if (!grad.defined()) continue;
      TORCH_CHECK(seen.insert(p.unsafeGetTensorImpl()).second,
                  "FusedSGD: a parameter appears more than once in the param groups");
      TORCH_CHECK(!grad.is_sparse(), "FusedSGD: sparse gradients are not supported");
      TORCH_CHECK(p.device().is_cpu() && grad.device().is_cpu(), "FusedSGD: parameters and gradients must be on the CPU, got ",
                  p.device(), " and ", grad.device());
      const auto key = compat::optimizer_state_key(state_, p);
      auto it = state_.find(key);
      SGDParamState* st = it == state_.end() ? nullptr : static_cast<SGDParamState*>(it->second.get());
      const bool momentum = o.momentum() != 0;
      at::Tensor buf = st ? st->momentum_buffer() : at::Tensor();
      const bool fusable = p.scalar_type() == at::kFloat && grad.scalar_type() == at::kFloat && p.is_contiguous() &&
                           grad.is_contiguous() && grad.sizes() == p.sizes() &&
                           (!momentum || !st ||
                            (buf.defined() && buf.scalar_type() == at::kFloat && buf.is_contiguous() &&
                             buf.sizes() == p.sizes()));
      if (!fusable) {
        ++unfused_;
        bool created = false;
        std::unique_ptr<SGDParamState> fresh;
        reference_update(p, o, momentum ? st : nullptr, &created, &fresh);
        if (created) state_[key] = std::move(fresh);
        continue;
      }
      detail::SGDSpan s{};
      s.param = p.data_ptr<float>();
      s.grad = grad.data_ptr<float>();
      s.numel = p.numel();
      s.weight_decay = o.weight_decay() != 0;
      s.wd = static_cast<float>(o.weight_decay());
      s.momentum = static_cast<float>(o.momentum());
      s.one_minus_dampening = static_cast<float>(1 - o.dampening());
      s.neg_lr = static_cast<float>(-1 * o.lr());
      s.nesterov = o.nesterov();
      if (momentum) {
        if (!st) {
          // torch::clone(d_p) keeps the layout of a contiguous grad: a contiguous buffer.
          auto fresh = std::make_unique<SGDParamState>();
          fresh->momentum_buffer(at::empty_like(p, at::MemoryFormat::Contiguous));
          buf = fresh->momentum_buffer();
          state_[key] = std::move(fresh);
          s.first = true;
        }
        s.momentum_buffer = buf.data_ptr<float>();
      }
      spans.push_back(s);
    }
  }
#if defined(__x86_64__) || defined(_M_X64)
  const auto kernel = avx2_ ? &detail::sgd_avx2 : &detail::sgd_scalar;
#else
  const auto kernel = &detail::sgd_scalar;
#endif
  for (const auto& s : spans) {
    if (s.numel <= kGrain) kernel(s, 0, s.numel);
    else at::parallel_for(0, s.numel, kGrain, [&](std::int64_t b, std::int64_t e) { kernel(s, b, e); });
  }
  return loss;
}

}  // namespace accelkit::cpu
