// The fused multi-tensor AdamW kernel's plain C++ interface: raw device pointers and a stream
// as void*, so callers need neither CUDA nor LibTorch headers. Implemented in
// fused_adamw_kernel.cu (nvcc).
//
// Math per element, in this order and with float rounding at each step (no FMA contraction),
// the same as the CPU plugin's kernel and torch::optim::AdamW:
//   g = maximize ? -grad : grad;   p = p * decay;
//   m = m*beta1 + g*(1-beta1);     v = v*beta2 + ((1-beta2)*g)*g;
//   d = amsgrad ? (vmax = max(vmax, v)) : v
//   p = p + (neg_step_size * m) / (sqrt(d) / sqrt_bias_correction2 + eps)
// param and grad share one dtype (fp32, bf16 or fp16); the state is fp32. With master weights
// (model_param set) the param is the fp32 master, grad and model_param are bf16 or fp16, and
// the update writes the master and its rounding into model_param.
#pragma once

#include <cstddef>
#include <cstdint>

namespace accelkit::cuda {

enum class AdamWDtype : int { f32 = 0, bf16 = 1, f16 = 2 };

// Constants shared by every tensor of one launch (one param group).
struct AdamWGroupConstants {
  float decay;            // 1 - lr * weight_decay (exactly 1 without weight decay)
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float eps;
  bool maximize;
  // For tensors with a device step counter: the bias corrections are computed on the device
  // (in double, rounded to float as on the host) from lr, beta1 and beta2.
  double lr, beta1_d, beta2_d;
};

struct AdamWTensorArgs {
  void* param;
  const void* grad;
  float* exp_avg;
  float* exp_avg_sq;
  float* max_exp_avg_sq;  // null without amsgrad (then null for every tensor of the launch)
  std::int64_t numel;
  // Host bias corrections for this tensor's step (used when step is null).
  float neg_step_size;          // -lr / (1 - beta1^step)
  float sqrt_bias_correction2;  // sqrt(1 - beta2^step)
  // A float step counter on the device, already incremented for this step; lets a captured
  // CUDA graph replay with the right bias correction. Null: use the host values above.
  const float* step;
  // Master weights: the model's bf16/fp16 param, written with the updated fp32 `param`'s
  // rounding; `grad` then has this dtype. Null otherwise (then null for every tensor of the
  // launch).
  void* model_param;
};

// Updates every tensor with as few launches as the kernel-argument limit allows (whole tensors,
// up to 48 a launch, one block per 64K-element chunk; `dtype` is the grad's, and the param's
// without master weights, where f32 with model_param set is an invalid value),
// enqueued on `stream` (a cudaStream_t; null = the legacy default stream). Returns 0 or the
// cudaError_t of the first failed launch. Does not synchronise. Safe to capture in a graph.
int launch_fused_adamw(AdamWDtype dtype, const AdamWGroupConstants& constants, const AdamWTensorArgs* tensors,
                       std::size_t count, void* stream) noexcept;

// cudaGetErrorString of a value launch_fused_adamw returned.
const char* fused_adamw_error_string(int error) noexcept;

// The SASS architectures the kernel was built for (e.g. {80, 90}); PTX is embedded for the
// highest. Count in *count.
const int* fused_adamw_archs(std::size_t* count) noexcept;

}  // namespace accelkit::cuda
