// The CPU plugin's max_pool2d kernels (forward and backward), registered by the host at
// LibTorch's CPU dispatch key (OperatorKernel). pytorch/examples' MNIST network spends a fifth of
// its training step in LibTorch's NCHW max_pool2d (64x10x24x24: 0.76 ms of 3.5 ms at 2 threads),
// whose kernel branches per element; the 2x2 stride-2 windows of such networks run here
// branch-free and vectorised, with the same values and indices, and their gradient in one pass.
// Every other input - and every call while the host's gate is shut - goes to LibTorch's own
// kernel, called directly (at::cpu::), so the dispatcher never finds this one again.
#include "operator_kernels.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/ops/max_pool2d_with_indices_backward_cpu_dispatch.h>
#include <ATen/ops/max_pool2d_with_indices_cpu_dispatch.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <tuple>

#include "max_pool_kernel.hpp"

namespace accelkit::cpu {

namespace {

constexpr const char* kMaxPool = "max_pool2d_with_indices";
constexpr const char* kMaxPoolBackward = "max_pool2d_with_indices_backward";

std::atomic<KernelGate> max_pool_gate{nullptr};
std::atomic<std::uint64_t> max_pool_calls{0};
std::atomic<std::uint64_t> max_pool_backward_calls{0};

bool gate_open() {
  const KernelGate gate = max_pool_gate.load(std::memory_order_relaxed);
  return gate != nullptr && gate();
}

// A pair (kernel, stride, padding, dilation) as LibTorch reads it: one value for both
// dimensions, or two; `fallback` for the empty stride (= the kernel size).
bool pair_is(at::IntArrayRef v, int64_t want, bool empty_ok) {
  if (v.empty()) return empty_ok;
  if (v.size() == 1) return v[0] == want;
  return v.size() == 2 && v[0] == want && v[1] == want;
}

// The inputs the loop takes: 4-d contiguous NCHW fp32 on the CPU, 2x2 windows at stride 2, no
// padding or dilation, every window inside the plane.
bool fits(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
          at::IntArrayRef dilation, bool ceil_mode) {
  if (self.dim() != 4 || self.scalar_type() != at::kFloat || !self.device().is_cpu() || self.is_quantized())
    return false;
  if (!pair_is(kernel, 2, false) || !pair_is(stride, 2, true) || !pair_is(padding, 0, false) ||
      !pair_is(dilation, 1, false))
    return false;
  const int64_t H = self.size(2), W = self.size(3);
  if (H < 2 || W < 2 || self.numel() == 0) return false;
  if (ceil_mode && (H % 2 != 0 || W % 2 != 0)) return false;  // a last window half outside
  return self.is_contiguous() && self.suggest_memory_format() == at::MemoryFormat::Contiguous;
}

std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(const at::Tensor& self, at::IntArrayRef kernel,
                                                           at::IntArrayRef stride, at::IntArrayRef padding,
                                                           at::IntArrayRef dilation, bool ceil_mode) {
  if (!gate_open() || !fits(self, kernel, stride, padding, dilation, ceil_mode))
    return at::cpu::max_pool2d_with_indices(self, kernel, stride, padding, dilation, ceil_mode);
  const int64_t N = self.size(0), C = self.size(1), H = self.size(2), W = self.size(3);
  const int64_t OH = H / 2, OW = W / 2;
  at::Tensor out = at::empty({N, C, OH, OW}, self.options());
  at::Tensor indices = at::empty({N, C, OH, OW}, self.options().dtype(at::kLong));
  const detail::MaxPool2x2 p{self.data_ptr<float>(), out.data_ptr<float>(), indices.data_ptr<int64_t>(), H, W, OH, OW};
  // At least ~16k windows a chunk: below that a second thread costs more than it saves.
  const int64_t grain = std::max<int64_t>(1, 16384 / OW);
#if defined(__x86_64__) || defined(_M_X64)
  at::parallel_for(0, N * C * OH, grain, [&](int64_t begin, int64_t end) { detail::max_pool_2x2_avx2(p, begin, end); });
#else
  (void)p;
  (void)grain;
#endif
  max_pool_calls.fetch_add(1, std::memory_order_relaxed);
  return {out, indices};
}

// Its gradient, for what max_pool2d_with_indices above took: each window's gradient written to
// the element its index names, zeros around it, in one pass (LibTorch's kernel zero-fills the
// plane, then adds). Indices that do not name an element of their own window (not from such a
// pooling) go to LibTorch's kernel, as does every other input.
at::Tensor max_pool2d_with_indices_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                            at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                                            at::IntArrayRef dilation, bool ceil_mode, const at::Tensor& indices) {
  auto libtorch = [&] {
    return at::cpu::max_pool2d_with_indices_backward(grad_output, self, kernel, stride, padding, dilation, ceil_mode,
                                                     indices);
  };
  if (!gate_open() || !fits(self, kernel, stride, padding, dilation, ceil_mode)) return libtorch();
  const int64_t N = self.size(0), C = self.size(1), H = self.size(2), W = self.size(3);
  const int64_t OH = H / 2, OW = W / 2;
  const int64_t shape[] = {N, C, OH, OW};
  const at::IntArrayRef out_shape(shape);
  if (grad_output.scalar_type() != at::kFloat || !grad_output.is_contiguous() || grad_output.sizes() != out_shape ||
      indices.scalar_type() != at::kLong || !indices.is_contiguous() || indices.sizes() != out_shape ||
      !grad_output.device().is_cpu() || !indices.device().is_cpu())
    return libtorch();
  at::Tensor grad_input = at::empty_like(self, at::MemoryFormat::Contiguous);
  const detail::MaxPool2x2Backward p{grad_output.data_ptr<float>(), indices.data_ptr<int64_t>(),
                                     grad_input.data_ptr<float>(), H, W, OH, OW};
  std::atomic<int64_t> placed{0};
#if defined(__x86_64__) || defined(_M_X64)
  at::parallel_for(0, N * C, std::max<int64_t>(1, 16384 / (H * W)), [&](int64_t begin, int64_t end) {
    placed.fetch_add(detail::max_pool_2x2_backward_avx2(p, begin, end), std::memory_order_relaxed);
  });
#else
  (void)p;
#endif
  if (placed.load() != N * C * OH * OW) return libtorch();
  max_pool_backward_calls.fetch_add(1, std::memory_order_relaxed);
  return grad_input;
}

}  // namespace

std::vector<OperatorKernel> operator_kernels(const IsaFlags& isa) {
  std::vector<OperatorKernel> ks;
#if !defined(__x86_64__) && !defined(_M_X64)
  (void)isa;
  return ks;  // the loop is built for x86-64 only
#endif
  if (isa.avx2) {
    ks.push_back({kMaxPool, "2x2 windows at stride 2 over fp32 NCHW, branch-free AVX2; LibTorch's kernel for the rest",
                  [](torch::Library& library, KernelGate gate) {
                    max_pool_gate.store(gate, std::memory_order_relaxed);
                    library.impl(kMaxPool, TORCH_FN(max_pool2d_with_indices));
                  }});
    ks.push_back({kMaxPoolBackward,
                  "its gradient in one pass, no zero-fill first (AVX2); LibTorch's kernel for the rest",
                  [](torch::Library& library, KernelGate gate) {
                    max_pool_gate.store(gate, std::memory_order_relaxed);
                    library.impl(kMaxPoolBackward, TORCH_FN(max_pool2d_with_indices_backward));
                  }});
  }
  return ks;
}

Result<std::vector<std::string>> plan_operator_kernels(Toggle request, const IsaFlags& isa, std::string& reason) {
  std::vector<std::string> ops;
  for (const auto& k : operator_kernels(isa)) ops.push_back(k.op);
  if (request == Toggle::off) {
    reason = "kernels: LibTorch's own (kernels = off)";
    return std::vector<std::string>{};
  }
  if (ops.empty()) {
    if (request == Toggle::on)
      return Status(StatusCode::not_supported,
                    "kernels = on, but this CPU has none of the plugin's kernels (they need AVX2)");
    reason = "kernels: LibTorch's own (the plugin's need AVX2)";
    return ops;
  }
  reason = "kernels: max_pool2d_with_indices and its backward by the plugin for 2x2 stride-2 fp32 NCHW "
           "windows (AVX2, branch-free; LibTorch's NCHW kernel branches per element), LibTorch's for every "
           "other input";
  return ops;
}

std::uint64_t operator_kernel_calls(const std::string& op) noexcept {
  if (op == kMaxPool) return max_pool_calls.load(std::memory_order_relaxed);
  if (op == kMaxPoolBackward) return max_pool_backward_calls.load(std::memory_order_relaxed);
  return 0;
}

}  // namespace accelkit::cpu
