// Every LibTorch version difference accelkit cares about, in one place. Plugins and the core
// include this instead of writing their own #if TORCH_VERSION checks.
//
//   autocast: per-device-type functions since 2.4 (set_autocast_enabled(DeviceType, bool), ...);
//             before that one function pair per device (set_cpu_enabled, set_enabled for CUDA).
//   SDPA:     at::scaled_dot_product_attention and its backend controls exist from 2.0.
//   AdamW:    ATen's fused AdamW (at::_fused_adamw_) exists from 2.0.
//   optim:    torch::optim keys per-parameter state by a std::string in 1.x, a void* later.
//
// Thread-safety: autocast state is thread-local in LibTorch; the guard affects its thread only.
#pragma once

#include <sstream>
#include <string>
#include <type_traits>

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/version.h>

#define ACCELKIT_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#define ACCELKIT_HAS_SDPA ACCELKIT_TORCH_AT_LEAST(2, 0)
#define ACCELKIT_HAS_ATEN_FUSED_ADAMW ACCELKIT_TORCH_AT_LEAST(2, 0)

namespace accelkit::compat {

inline bool autocast_enabled(c10::DeviceType type) {
#if ACCELKIT_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(type);
#else
  return type == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

inline void set_autocast_enabled(c10::DeviceType type, bool on) {
#if ACCELKIT_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(type, on);
#else
  if (type == c10::DeviceType::CPU) at::autocast::set_cpu_enabled(on);
  else at::autocast::set_enabled(on);
#endif
}

inline at::ScalarType autocast_dtype(c10::DeviceType type) {
#if ACCELKIT_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(type);
#else
  return type == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
#endif
}

inline void set_autocast_dtype(c10::DeviceType type, at::ScalarType dtype) {
#if ACCELKIT_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(type, dtype);
#else
  if (type == c10::DeviceType::CPU) at::autocast::set_autocast_cpu_dtype(dtype);
  else at::autocast::set_autocast_gpu_dtype(dtype);
#endif
}

// RAII: autocast on `type` with `dtype` for the guard's scope (or explicitly off), restoring
// the previous state and clearing the cast cache when the outermost guard ends - what
// torch.autocast does in Python.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType type, bool enabled, at::ScalarType dtype)
      : type_(type), prev_enabled_(autocast_enabled(type)), prev_dtype_(autocast_dtype(type)),
        set_dtype_(enabled && dtype != prev_dtype_) {
    // The dtype is only set when autocast is on: LibTorch 1.13 refuses fp32 as a CPU autocast dtype.
    if (set_dtype_) set_autocast_dtype(type_, dtype);
    set_autocast_enabled(type_, enabled);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set_autocast_enabled(type_, prev_enabled_);
    if (set_dtype_) set_autocast_dtype(type_, prev_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType type_;
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

namespace accelkit::compat {

struct SdpaBackends {
  bool flash = true;
  bool mem_efficient = true;
  bool math = true;
};

inline constexpr bool kSdpaControllable = ACCELKIT_HAS_SDPA;

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
