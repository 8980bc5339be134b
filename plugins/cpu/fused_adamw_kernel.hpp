// Internal to the fused AdamW: the per-ISA element loops. Plain data only, so the ISA
// translation units (built with -mavx2 / -mavx512f) include nothing with inline functions
// that the linker could share with code running on older CPUs.
#pragma once

#include <cstdint>

namespace accelkit::cpu::detail {

// Per-tensor constants, already rounded to float the way torch::optim::AdamW rounds them.
struct AdamWConstants {
  float decay;          // 1 - lr * weight_decay (exactly 1 without weight decay)
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float sqrt_bias_correction2;
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^step)
  uint32_t grad_sign;   // 0x80000000 to negate the gradient (maximize), else 0
};

// One tensor's worth of flat, elementwise-aligned buffers. param and grad are float or
// bfloat16 (both the same type); the state is float. max_exp_avg_sq is null without amsgrad.
// master (bfloat16 params only, else null) is the param's float master copy: the update then
// reads and writes master, and param receives master's bfloat16 rounding (param is not read).
struct AdamWSpan {
  void* param;
  const void* grad;
  float* exp_avg;
  float* exp_avg_sq;
  float* max_exp_avg_sq;
  float* master;
  int64_t numel;
  bool bf16;
  AdamWConstants c;
};

// Update elements [begin, end) of span. Every ISA performs the same float operations in the
// same order (no FMA contraction), so the results are bitwise identical across paths.
void adamw_scalar(const AdamWSpan& span, int64_t begin, int64_t end);
#if defined(__x86_64__) || defined(_M_X64)
#define ACCELKIT_ADAMW_X86 1
void adamw_avx2(const AdamWSpan& span, int64_t begin, int64_t end);
void adamw_avx512(const AdamWSpan& span, int64_t begin, int64_t end);
#endif

}  // namespace accelkit::cpu::detail
