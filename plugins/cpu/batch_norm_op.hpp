// Internal to the CPU plugin's operator kernels (operator_kernels.cpp): training-mode batch
// normalisation over fp32 (aten::native_batch_norm with training = true, and its backward).
// LibTorch's CPU kernel makes three passes over the input for its forward (two for the
// statistics, one to normalise) and, in channels-last, its backward runs at a fraction of memory
// speed: on a Xeon's two cores a 128x16x32x32 channels-last forward took 0.80 ms and its backward
// 0.88 ms (NCHW: 1.69 ms forward), against 0.29 ms for a copy of the tensor; here 0.46, 0.73 and
// 0.43 ms. The statistics are one pass (sums of shifted values, added up in double) and the
// normalisation one more; the backward one pass for its two sums and one for the gradient - each
// parallel over fixed chunks of the tensor, so the result does not depend on the number of threads.
//
// Forward: channels-last 4-d or 5-d, 2-d [N, C], and contiguous NCHW-style tensors of 3 to 5
// dimensions. Backward: channels-last and [N, C] (LibTorch's NCHW backward already reads at
// memory speed; it takes this forward's save_mean and save_invstd as its own). Everything else -
// eval mode, other dtypes, other strides, fewer than two values a channel - is LibTorch's
// (nullopt here).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <tuple>

namespace accelkit::cpu::batch_norm {

using Result3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// aten::native_batch_norm(input, weight, bias, running_mean, running_var, training = true,
// momentum, eps): {output, save_mean, save_invstd}, the running statistics updated in place as
// LibTorch updates them (the unbiased variance). nullopt: not an input this path takes.
std::optional<Result3> forward(const at::Tensor& input, const c10::optional<at::Tensor>& weight,
                               const c10::optional<at::Tensor>& bias, const c10::optional<at::Tensor>& running_mean,
                               const c10::optional<at::Tensor>& running_var, double momentum, double eps);

// aten::native_batch_norm_backward with train = true for what forward() took (the same layout for
// grad_out as for input): {grad_input, grad_weight, grad_bias} as output_mask asks.
std::optional<Result3> backward(const at::Tensor& grad_out, const at::Tensor& input,
                                const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& save_mean,
                                const c10::optional<at::Tensor>& save_invstd, std::array<bool, 3> output_mask);

}  // namespace accelkit::cpu::batch_norm
