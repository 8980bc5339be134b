#include "fused_adamw.hpp"

#include <ATen/Parallel.h>
#include <torch/serialize/archive.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_set>
#include <utility>

#include "accelkit/sdk/support/adamw_state.hpp"
#include "accelkit/sdk/support/master_weights.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "fused_adamw_kernel.hpp"

namespace accelkit::cpu {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;
using KernelFn = void (*)(const detail::AdamWSpan&, int64_t, int64_t);

// A step uses at most one thread per kMinChunk elements (all of them on one thread below 2x).
constexpr int64_t kMinChunk = 32 * 1024;
// Largest unit of work a thread takes at a time: 512 KB of each float stream.
constexpr int64_t kMaxPiece = 128 * 1024;

KernelFn kernel_for(AdamWIsa isa) {
  switch (isa) {
#ifdef ACCELKIT_ADAMW_X86
    case AdamWIsa::avx512: return detail::adamw_avx512;
    case AdamWIsa::avx2: return detail::adamw_avx2;
#endif
    default: return detail::adamw_scalar;
  }
}

// Runs fn over all spans. Each tensor is cut into pieces (starts at multiples of 64 elements,
// so they keep the tensor's alignment), about 8 per thread, kMinChunk..kMaxPiece elements;
// threads take pieces from a shared counter, which keeps them all busy to the end even when
// one is slowed down (a busy machine, a noisy neighbour).
void run_spans(const std::vector<detail::AdamWSpan>& spans, KernelFn fn) {
  int64_t total = 0;
  for (const auto& s : spans) total += s.numel;
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), total / kMinChunk);
  if (threads <= 1 || at::in_parallel_region()) {
    for (const auto& s : spans) fn(s, 0, s.numel);
    return;
  }
  const int64_t piece = std::clamp(total / (8 * threads), kMinChunk, kMaxPiece) / 64 * 64;
  struct Piece {
    const detail::AdamWSpan* span;
    int64_t begin, end;
  };
  std::vector<Piece> pieces;
  for (const auto& s : spans)
    for (int64_t b = 0; b < s.numel; b += piece) pieces.push_back({&s, b, std::min(s.numel, b + piece)});
  std::atomic<size_t> next{0};
  at::parallel_for(0, threads, 1, [&](int64_t, int64_t) {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < pieces.size();)
      fn(*pieces[i].span, pieces[i].begin, pieces[i].end);
  });
}

}  // namespace

const char* adamw_isa_name(AdamWIsa isa) {
  switch (isa) {
    case AdamWIsa::avx512: return "avx512";
    case AdamWIsa::avx2: return "avx2";
    case AdamWIsa::scalar: return "scalar";
  }
  return "?";
}

bool adamw_isa_supported(AdamWIsa isa) {
  switch (isa) {
    case AdamWIsa::scalar: return true;
#ifdef ACCELKIT_ADAMW_X86
    case AdamWIsa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case AdamWIsa::avx512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#else
    default: return false;
#endif
  }
  return false;
}

AdamWIsa adamw_default_isa() {
  AdamWIsa best = AdamWIsa::scalar;
  for (auto isa : {AdamWIsa::avx2, AdamWIsa::avx512})
    if (adamw_isa_supported(isa)) best = isa;
  const char* env = secure_getenv("ACCELKIT_ADAMW_ISA");
  if (!env || !*env) return best;
  for (auto isa : {AdamWIsa::scalar, AdamWIsa::avx2, AdamWIsa::avx512}) {
    if (std::strcmp(env, adamw_isa_name(isa)) != 0) continue;
    if (adamw_isa_supported(isa)) return isa;
    TORCH_WARN("ACCELKIT_ADAMW_ISA=", env, ": this CPU lacks it; using ", adamw_isa_name(best));
    return best;
  }
  TORCH_CHECK(false, "ACCELKIT_ADAMW_ISA=", env, ": expected scalar, avx2 or avx512");
  return best;
}

FusedAdamW::FusedAdamW(std::vector<torch::optim::OptimizerParamGroup> param_groups, AdamWOptions defaults,
                       bool maximize, bool master_weights)
    : AdamW(std::move(param_groups), std::move(defaults)),
      maximize_(maximize),
      master_weights_(master_weights),
      isa_(adamw_default_isa()) {
  if (master_weights_) adopt_master_weights();
}

FusedAdamW::FusedAdamW(std::vector<torch::Tensor> params, AdamWOptions defaults, bool maximize,
                       bool master_weights)
    : FusedAdamW({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults), maximize,
                 master_weights) {}

void FusedAdamW::adopt_master_weights() {
  masters_.adopt(param_groups_, "FusedAdamW", [](const at::Tensor& p) { return p.device().is_cpu(); }, "on the CPU");
}

at::Tensor FusedAdamW::master_of(const at::Tensor& param) const { return masters_.of(param); }

void FusedAdamW::save(torch::serialize::OutputArchive& archive) const {
  AdamW::save(archive);
  masters_.save(param_groups_, archive);
}

void FusedAdamW::load(torch::serialize::InputArchive& archive) {
  AdamW::load(archive);
  if (master_weights_) masters_.load(param_groups_, archive, "FusedAdamW");
}

void FusedAdamW::set_isa(AdamWIsa isa) {
  TORCH_CHECK(adamw_isa_supported(isa), "FusedAdamW: this CPU cannot run the ", adamw_isa_name(isa), " path");
  isa_ = isa;
}

std::string FusedAdamW::implementation() const {
  const int threads = at::get_num_threads();
  return std::string("fused AdamW (") + adamw_isa_name(isa_) + ", " + std::to_string(threads) +
         (threads == 1 ? " thread" : " threads") + (master_weights_ ? ", bf16 weights + fp32 master)" : ")");
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }

  std::vector<detail::AdamWSpan> spans;
  std::vector<at::Tensor> grads;                              // converted grads the spans point into
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (param, contiguous work copy)
  std::unordered_set<const void*> seen;

  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    for (auto& p : group.params()) {
      const auto& grad = p.grad();
      if (!grad.defined()) continue;
      // Twice in the list would be two concurrent updates of the same memory.
      TORCH_CHECK(seen.insert(p.unsafeGetTensorImpl()).second, "FusedAdamW: a parameter appears more than once "
                  "in the param groups");
      TORCH_CHECK(p.device().is_cpu() && grad.device().is_cpu(), "FusedAdamW: parameters and gradients must be "
                  "on the CPU, got ", p.device(), " and ", grad.device());
      const auto dtype = p.scalar_type();
      // Fused: float state whatever the param dtype; otherwise the param's dtype, as AdamW.
      const bool fused = dtype == at::kFloat || dtype == at::kBFloat16;
      support::PreparedParam prep = support::prepare_adamw_param(state_, p, o, maximize_, fused, "FusedAdamW");
      if (!prep.run_kernel) continue;
      at::Tensor pw = prep.work;
      if (prep.copy_back) copy_back.emplace_back(p, pw);
      grads.push_back(prep.grad);
      auto& st = *prep.state;
      const auto [beta1, beta2] = o.betas();
      const double bc1 = prep.bc1, bc2 = prep.bc2;
      float* master = nullptr;
      if (master_weights_ && dtype == at::kBFloat16) {
        master = masters_.for_step(p, pw, "FusedAdamW").data_ptr<float>();
      }

      detail::AdamWSpan span{};
      span.param = pw.data_ptr();
      span.grad = prep.grad.data_ptr();
      span.exp_avg = st.exp_avg().data_ptr<float>();
      span.exp_avg_sq = st.exp_avg_sq().data_ptr<float>();
      span.max_exp_avg_sq = o.amsgrad() ? st.max_exp_avg_sq().data_ptr<float>() : nullptr;
      span.master = master;
      span.numel = p.numel();
      span.bf16 = dtype == at::kBFloat16;
      // Each scalar rounded to float as the ATen ops in torch::optim::AdamW round them.
      auto& c = span.c;
      c.decay = o.weight_decay() != 0 ? static_cast<float>(1 - o.lr() * o.weight_decay()) : 1.0f;
      c.beta1 = static_cast<float>(beta1);
      c.one_minus_beta1 = static_cast<float>(1 - beta1);
      c.beta2 = static_cast<float>(beta2);
      c.one_minus_beta2 = static_cast<float>(1 - beta2);
      c.sqrt_bias_correction2 = static_cast<float>(std::sqrt(bc2));
      c.eps = static_cast<float>(o.eps());
      c.neg_step_size = static_cast<float>(-o.lr() / bc1);
      c.grad_sign = maximize_ ? 0x80000000u : 0u;
      spans.push_back(span);
    }
  }

  run_spans(spans, kernel_for(isa_));
  for (auto& [dst, src] : copy_back) dst.copy_(src);
  return loss;
}

}  // namespace accelkit::cpu
