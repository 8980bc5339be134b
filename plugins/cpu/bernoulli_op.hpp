// Internal to the CPU plugin's operator kernels (operator_kernels.cpp): aten::bernoulli_.float,
// the in-place draw of 0s and 1s that dropout makes its mask with (LibTorch's dropout on a CPU
// is empty_like(x).bernoulli_(1 - p), then a multiply). LibTorch's CPU kernel draws each element
// in turn from one Mersenne Twister under a lock: about 7 ns an element whatever the thread
// count, which was 92 ms of a 200 ms training step of a small transformer (d 128, 3 layers,
// batch 64 x 64 tokens) on a 2-core Xeon. Here the numbers come from Philox4x32-10, a
// counter-based generator, sixteen blocks at once in AVX-512 registers (eight in AVX2 ones), on
// every thread
// (bernoulli_kernel.hpp), keyed by one 64-bit draw from the tensor's generator (the default
// CPU generator unless one is given), so torch::manual_seed still makes a run repeat itself,
// at any thread count. The masks are not the ones LibTorch's kernel would draw: both are
// independent Bernoulli(p) draws.
#pragma once

#include <ATen/ATen.h>

namespace accelkit::cpu::bernoulli {

// Fills `self` (on the CPU: fp32, fp64, bf16, fp16, an integer type or bool - TorchScript's
// dropout draws a bool mask; dense, any strides without overlap) with
// draws of Bernoulli(p), 0 <= p <= 1; false (nothing done) for anything else, which LibTorch's
// kernel then takes - and for p outside [0, 1] reports. `avx512`: the CPU has AVX-512F (the
// wider loop; the same numbers).
bool fill(at::Tensor& self, double p, const c10::optional<at::Generator>& generator, bool avx512);

}  // namespace accelkit::cpu::bernoulli
