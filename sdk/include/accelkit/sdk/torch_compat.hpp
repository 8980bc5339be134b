// Every LibTorch version difference accelkit cares about, in one place. Plugins and the core
// include this instead of writing their own #if TORCH_VERSION checks.
//
//   autocast: per-device-type functions since 2.4 (set_autocast_enabled(DeviceType, bool), ...);
//             before that one function pair per device (set_cpu_enabled, set_enabled for CUDA).
//   SDPA:     at::scaled_dot_product_attention and its backend controls exist from 2.0.
//   AdamW:    ATen's fused AdamW (at::_fused_adamw_): the op from 2.0 with CUDA kernels, CPU
//             kernels from 2.4 (aten_fused_adamw_available, aten_fused_adamw_); a kernel another
//             build or extension registered for its device type (aten_fused_adamw_registered).
//   SGD:      ATen's fused SGD (at::_fused_sgd_): CUDA kernels from 2.3, CPU kernels from 2.4
//             (aten_fused_sgd_available, aten_fused_sgd_).
//   optim:    torch::optim keys per-parameter state by a std::string in 1.x, a void* later.
//   graphs:   at::cuda::CUDAGraph::capture_begin() takes (pool) in 1.13 and (pool, capture mode)
//             from 2.0, both defaulted: call it with no arguments (plugins/cuda/graph_step.cpp).
//   autocast on MPS: from 2.5 (autocast_available).
//   warnings: the handler's process() takes a c10::Warning and lives in c10::WarningUtils from
//             2.0; (location, message, verbatim) in c10::Warning before (WarningCollector).
//   profiler: Kineto (from 2.2, where LibTorch was built with it) or the legacy autograd
//             profiler: torch_compat_profiler.hpp.
//   Not used by accelkit yet, so not here yet: c10d (process groups wrap a c10d::Backend from
//   2.0). Its differences come here with the code that needs it.
//
// Differences whose headers are too heavy for every file may live in sibling headers named
// torch_compat_*.hpp; no other file tests TORCH_VERSION_*, ACCELKIT_TORCH_AT_LEAST or an
// ACCELKIT_HAS_* macro in a preprocessor condition (tests/compat_guard_test.sh checks).
//
// Thread-safety: autocast state is thread-local in LibTorch; the guard affects its thread only.
#pragma once

#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#define ACCELKIT_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#define ACCELKIT_HAS_SDPA ACCELKIT_TORCH_AT_LEAST(2, 0)
#define ACCELKIT_HAS_ATEN_FUSED_ADAMW ACCELKIT_TORCH_AT_LEAST(2, 0)
#define ACCELKIT_HAS_ATEN_FUSED_ADAMW_CPU ACCELKIT_TORCH_AT_LEAST(2, 4)
#define ACCELKIT_HAS_ATEN_FUSED_SGD ACCELKIT_TORCH_AT_LEAST(2, 3)
#define ACCELKIT_HAS_ATEN_FUSED_SGD_CPU ACCELKIT_TORCH_AT_LEAST(2, 4)

namespace accelkit::compat {

// Whether LibTorch has an autocast for `type`: CPU and CUDA always here; MPS from 2.5 (the
// per-device-type API of 2.4 plus MPS's own casts). Other types: not relied on.
inline constexpr bool autocast_available(c10::DeviceType type) {
  switch (type) {
    case c10::DeviceType::CPU:
    case c10::DeviceType::CUDA: return true;
    case c10::DeviceType::MPS: return ACCELKIT_TORCH_AT_LEAST(2, 5);
    default: return false;
  }
}

inline bool autocast_enabled(c10::DeviceType type) {
#if ACCELKIT_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(type);
#else
  TORCH_CHECK(autocast_available(type), "no autocast for ", type, " in this LibTorch");
  return type == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

inline void set_autocast_enabled(c10::DeviceType type, bool on) {
#if ACCELKIT_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(type, on);
#else
  TORCH_CHECK(autocast_available(type), "no autocast for ", type, " in this LibTorch");
  if (type == c10::DeviceType::CPU) at::autocast::set_cpu_enabled(on);
  else at::autocast::set_enabled(on);
#endif
}

// The autocast dtype set for `type`; fp32 for a device type this LibTorch has no autocast for
// (it computes in what it is given).
inline at::ScalarType autocast_dtype(c10::DeviceType type) {
#if ACCELKIT_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(type);
#else
  if (!autocast_available(type)) return at::kFloat;
  return type == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
#endif
}

inline void set_autocast_dtype(c10::DeviceType type, at::ScalarType dtype) {
#if ACCELKIT_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(type, dtype);
#else
  TORCH_CHECK(autocast_available(type), "no autocast for ", type, " in this LibTorch");
  if (type == c10::DeviceType::CPU) at::autocast::set_autocast_cpu_dtype(dtype);
  else at::autocast::set_autocast_gpu_dtype(dtype);
#endif
}

// RAII: autocast on `type` with `dtype` for the guard's scope (or explicitly off), restoring
// the previous state and clearing the cast cache when the outermost guard ends - what
// torch.autocast does in Python. On a device type without autocast in this LibTorch (a new
// device type on 1.13), "off" is what it has: the guard does nothing; "on" is refused.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType type, bool enabled, at::ScalarType dtype)
      : type_(type), available_(autocast_available(type) || enabled),
        prev_enabled_(available_ && autocast_enabled(type)),
        prev_dtype_(available_ ? autocast_dtype(type) : dtype),
        set_dtype_(enabled && dtype != prev_dtype_) {
    if (!available_) return;
    // The dtype is only set when autocast is on: LibTorch 1.13 refuses fp32 as a CPU autocast dtype.
    if (set_dtype_) set_autocast_dtype(type_, dtype);
    set_autocast_enabled(type_, enabled);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!available_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set_autocast_enabled(type_, prev_enabled_);
    if (set_dtype_) set_autocast_dtype(type_, prev_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType type_;
  bool available_;
  bool prev_enabled_;
  at::ScalarType prev_dtype_;
  bool set_dtype_;
};

}  // namespace accelkit::compat

// ---- scaled-dot-product attention backends ---------------------------------------------------
// LibTorch >= 2.0 has at::scaled_dot_product_attention and process-wide switches for its flash,
// memory-efficient and math backends (at::globalContext().setSDPUse*). Before 2.0 there is no
// public SDPA: sdpa_backends() reports all on and set_sdpa_backends() changes nothing and
// returns false.
#include <ATen/Context.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>
#if ACCELKIT_HAS_SDPA
#include <ATen/ops/scaled_dot_product_attention.h>
#endif
#include <cmath>

namespace accelkit::compat {

struct SdpaBackends {
  bool flash = true;
  bool mem_efficient = true;
  bool math = true;
};

inline constexpr bool kSdpaControllable = ACCELKIT_HAS_SDPA;

// LibTorch 1.x's CPU kernel for transposed convolutions returns NCHW results whatever the layout
// of its inputs; 2.x's are channels-last where the input or the weight is (checked on 1.13.1 and
// 2.13.0).
inline constexpr bool kTransposedConvFollowsChannelsLast = ACCELKIT_TORCH_AT_LEAST(2, 0);

// LibTorch 1.x's CPU at::mm of bf16 matrices sums small products in bf16 (errors of 0.4-1% of
// the sums' magnitude on random convolution patches, checked on 1.13.1 with AVX512_BF16); 2.x's
// sum in fp32 at every size (checked on 2.13.0).
inline constexpr bool kBf16MatmulSumsInFp32 = ACCELKIT_TORCH_AT_LEAST(2, 0);

inline SdpaBackends sdpa_backends() {
  SdpaBackends out;
#if ACCELKIT_HAS_SDPA
  const auto& ctx = at::globalContext();
  out.flash = ctx.userEnabledFlashSDP();
  out.mem_efficient = ctx.userEnabledMemEfficientSDP();
  out.math = ctx.userEnabledMathSDP();
#endif
  return out;
}

// softmax(q k^T / sqrt(d)) v over the last two dimensions: at::scaled_dot_product_attention
// where LibTorch has it, else the math path written out (the scale on q: B*H*T*dh multiplies
// instead of B*H*T*T).
inline at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if ACCELKIT_HAS_SDPA
  return at::scaled_dot_product_attention(q, k, v);
#else
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  return at::matmul(at::softmax(at::matmul(q * scale, k.transpose(-2, -1)), -1), v);
#endif
}

// Enables exactly the given backends; false when this LibTorch has no SDPA controls.
inline bool set_sdpa_backends(const SdpaBackends& b) {
#if ACCELKIT_HAS_SDPA
  auto& ctx = at::globalContext();
  ctx.setSDPUseFlash(b.flash);
  ctx.setSDPUseMemEfficient(b.mem_efficient);
  ctx.setSDPUseMath(b.math);
  return true;
#else
  (void)b;
  return false;
#endif
}

}  // namespace accelkit::compat

// ---- torch::optim state keys ---------------------------------------------------------------
namespace accelkit::compat {

// The key torch::optim::Optimizer::state() holds p's state under: the TensorImpl address, as
// its operator<< text in LibTorch 1.x (std::string keys) and as void* in later versions.
// `state` is only used for its type.
template <typename StateMap>
typename StateMap::key_type optimizer_state_key(const StateMap& /*state*/, const at::Tensor& p) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os;
    os << p.unsafeGetTensorImpl();
    return os.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

}  // namespace accelkit::compat

// ---- LibTorch's warnings ------------------------------------------------------------------
namespace accelkit::compat {

// Collects what LibTorch warns (TORCH_WARN) on this thread while it lives, instead of printing
// it, so that the caller can report it where it belongs. Restores the previous handler.
class WarningCollector final : public c10::WarningHandler {
 public:
#if ACCELKIT_TORCH_AT_LEAST(2, 0)
  WarningCollector() : previous_(c10::WarningUtils::get_warning_handler()) { c10::WarningUtils::set_warning_handler(this); }
  ~WarningCollector() override { c10::WarningUtils::set_warning_handler(previous_); }
  void process(const c10::Warning& warning) override { messages_.push_back(warning.msg()); }
#else
  WarningCollector() : previous_(c10::Warning::get_warning_handler()) { c10::Warning::set_warning_handler(this); }
  ~WarningCollector() override { c10::Warning::set_warning_handler(previous_); }
  void process(const c10::SourceLocation& /*where*/, const std::string& msg, const bool /*verbatim*/) override {
    messages_.push_back(msg);
  }
#endif
  WarningCollector(const WarningCollector&) = delete;
  WarningCollector& operator=(const WarningCollector&) = delete;
  const std::vector<std::string>& messages() const noexcept { return messages_; }

 private:
  c10::WarningHandler* previous_;
  std::vector<std::string> messages_;
};

}  // namespace accelkit::compat

// ---- ATen's fused AdamW --------------------------------------------------------------------
#if ACCELKIT_HAS_ATEN_FUSED_ADAMW
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_fused_adamw.h>
#include <c10/core/TensorOptions.h>
#endif
#if ACCELKIT_HAS_ATEN_FUSED_SGD
#include <ATen/ops/_fused_sgd.h>
#endif
#include <c10/util/Exception.h>

namespace accelkit::compat {

// Whether this LibTorch has at::_fused_adamw_ kernels for tensors on `type`.
inline constexpr bool aten_fused_adamw_available(c10::DeviceType type) {
  switch (type) {
    case c10::DeviceType::CUDA: return ACCELKIT_HAS_ATEN_FUSED_ADAMW;
    case c10::DeviceType::CPU: return ACCELKIT_HAS_ATEN_FUSED_ADAMW_CPU;
    default: return false;
  }
}

// Whether at::_fused_adamw_ steps tensors on `type` in this process: the kernels LibTorch ships
// (aten_fused_adamw_available), or one registered for the type's dispatch key at run time (an
// XPU build's, or a vendor extension's for its PrivateUse1 device), as LibTorch's dispatcher
// holds them now.
inline bool aten_fused_adamw_registered(c10::DeviceType type) {
  if (aten_fused_adamw_available(type)) return true;
#if ACCELKIT_HAS_ATEN_FUSED_ADAMW
  const auto op = c10::Dispatcher::singleton().findOp({"aten::_fused_adamw_", ""});
  if (!op) return false;
  const c10::DispatchKey key = c10::computeDispatchKey({}, {}, c10::Device(type));
  return op->hasKernelForDispatchKey(key);
#else
  return false;
#endif
}

// One multi-tensor AdamW step over lists on one device and of one dtype. `steps` are float
// scalar tensors on that device holding each parameter's step count, already advanced for
// this step (as PyTorch's own _fused_adamw does). max_exp_avg_sqs: empty without amsgrad.
// Throws c10::Error where aten_fused_adamw_available() is false.
inline void aten_fused_adamw_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                              at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps,
                              double lr, double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                              bool maximize) {
#if ACCELKIT_HAS_ATEN_FUSED_ADAMW
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, weight_decay, eps,
                    amsgrad, maximize);
#else
  (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)max_exp_avg_sqs, (void)steps, (void)lr,
      (void)beta1, (void)beta2, (void)weight_decay, (void)eps, (void)amsgrad, (void)maximize;
  TORCH_CHECK(false, "at::_fused_adamw_ needs LibTorch >= 2.0 (this is ", TORCH_VERSION_MAJOR, ".",
              TORCH_VERSION_MINOR, ")");
#endif
}

// Whether this LibTorch has at::_fused_sgd_ kernels for tensors on `type`.
inline constexpr bool aten_fused_sgd_available(c10::DeviceType type) {
  switch (type) {
    case c10::DeviceType::CUDA: return ACCELKIT_HAS_ATEN_FUSED_SGD;
    case c10::DeviceType::CPU: return ACCELKIT_HAS_ATEN_FUSED_SGD_CPU;
    default: return false;
  }
}

// One multi-tensor SGD step over lists on one device and of one dtype (PyTorch's
// torch.optim.SGD(fused=True)). momentum_buffers: empty when momentum is 0; with
// is_first_step the kernel fills them with the (decayed) gradient, as torch::optim::SGD's first
// step clones it. Throws c10::Error where aten_fused_sgd_available() is false.
inline void aten_fused_sgd_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers,
                            double weight_decay, double momentum, double lr, double dampening, bool nesterov,
                            bool maximize, bool is_first_step) {
#if ACCELKIT_HAS_ATEN_FUSED_SGD
  at::_fused_sgd_(params, grads, momentum_buffers, weight_decay, momentum, lr, dampening, nesterov, maximize,
                  is_first_step);
#else
  (void)params, (void)grads, (void)momentum_buffers, (void)weight_decay, (void)momentum, (void)lr, (void)dampening,
      (void)nesterov, (void)maximize, (void)is_first_step;
  TORCH_CHECK(false, "at::_fused_sgd_ needs LibTorch >= 2.3 (this is ", TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR,
              ")");
#endif
}

}  // namespace accelkit::compat
