// Internal to the fused SGD: the per-ISA element loops. Plain data only (see
// fused_adamw_kernel.hpp for why the ISA translation units include nothing else).
#pragma once

#include <cstdint>

namespace accelkit::cpu::detail {

// One float tensor's flat buffers and its group's options, each scalar rounded to float as the
// ATen ops of torch::optim::SGD round them (an add's alpha becomes a float).
struct SGDSpan {
  float* param;
  const float* grad;
  float* momentum_buffer;  // null without momentum
  int64_t numel;
  bool first;              // the buffer starts as the step's direction (torch::clone(d_p))
  bool nesterov;
  bool weight_decay;       // weight_decay != 0
  float wd;                // weight_decay
  float momentum;
  float one_minus_dampening;
  float neg_lr;            // -lr
};

// Update elements [begin, end) of span with torch::optim::SGD's operations, each an ATen
// add with alpha (a fused multiply-add, as ATen's vectorised kernels compute it) or a mul:
//   d = g + wd*p;  b = b*momentum + (1-dampening)*d  (first step: b = d);
//   d = nesterov ? d + momentum*b : b;  p = p + (-lr)*d
void sgd_scalar(const SGDSpan& span, int64_t begin, int64_t end);
#if defined(__x86_64__) || defined(_M_X64)
void sgd_avx2(const SGDSpan& span, int64_t begin, int64_t end);
#endif

}  // namespace accelkit::cpu::detail
