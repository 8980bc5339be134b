// Precision: the execution plan of a device - which dtype, TF32, loss scaling, intra-op thread
// count, host BLAS kernels and operator kernels of the plugin's own it should use, why, and how
// to apply that to LibTorch and read it back. (The name is the design's; the plan covers more
// than the dtype.)
//
// Requests and plans are typed (since ABI 5.0; strings before): a plugin switches over enums
// and never sees a misspelt value - the host's settings reject those before asking.
//
// Thread-safety: plan() is pure and may be called from any thread. apply() changes LibTorch
// process-wide state (threads, TF32, BLAS kernels) and the calling thread's autocast state;
// call it from the thread that will run the model, while no other work runs on it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "accelkit/sdk/status.hpp"

namespace torch { class Library; }

namespace accelkit {

// A compute dtype. Since ABI 5.0.
enum class Dtype : std::uint8_t { fp32, bf16, fp16 };

inline constexpr std::pair<Dtype, std::string_view> kDtypeNames[] = {
    {Dtype::fp32, "fp32"}, {Dtype::bf16, "bf16"}, {Dtype::fp16, "fp16"}};

inline const char* to_string(Dtype d) noexcept {
  switch (d) {
    case Dtype::fp32: return "fp32";
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
  }
  return "fp32";
}

// Prints its name ("bf16"), so that a program can stream rt->precision().dtype.
inline std::ostream& operator<<(std::ostream& os, Dtype d) { return os << to_string(d); }

inline std::optional<Dtype> dtype_from_string(std::string_view s) noexcept {
  for (const auto& [d, name] : kDtypeNames)
    if (name == s) return d;
  return std::nullopt;
}

// A three-way request: the plugin's rule decides (automatic), or on / off as asked. Since ABI 5.0.
enum class Toggle : std::uint8_t { automatic, on, off };

inline const char* to_string(Toggle t) noexcept {
  switch (t) {
    case Toggle::automatic: return "auto";
    case Toggle::on: return "on";
    case Toggle::off: return "off";
  }
  return "auto";
}

// Host BLAS kernels (CPU). Since ABI 5.0.
enum class BlasKernels : std::uint8_t {
  automatic,  // the plugin may replace a kernel set narrower than the CPU runs
  library,    // keep the BLAS library's own choice
};

inline const char* to_string(BlasKernels b) noexcept { return b == BlasKernels::library ? "library" : "auto"; }

// What the user asked for.
struct PrecisionRequest {
  std::optional<Dtype> precision;     // the autocast dtype; nullopt = the plugin's rules decide
  Toggle tf32 = Toggle::automatic;    // TF32 for fp32 matmul/convolution
  int threads = 0;                    // intra-op threads; 0 = the plugin's choice (never < 0)
  BlasKernels blas = BlasKernels::automatic;
  // The plugin's own operator kernels (OperatorKernel below): its rules decide, on, or off
  // (LibTorch's kernels only). Since ABI 10.0.
  Toggle kernels = Toggle::automatic;
};

// "auto" or the dtype's name, for messages.
inline const char* precision_name(const std::optional<Dtype>& p) noexcept { return p ? to_string(*p) : "auto"; }

// A decision, with the reason for each value.
struct PrecisionPlan {
  Dtype dtype = Dtype::fp32;     // compute dtype under autocast
  bool autocast = false;         // run forward under autocast with `dtype`
  bool tf32 = false;             // TF32 for fp32 matmul/convolution
  bool loss_scaling = false;     // dynamic loss scaling (fp16)
  int threads = 0;               // intra-op threads to set; 0 = leave LibTorch's default
  std::string blas_kernels;      // host BLAS kernel set to select ("SkylakeX"); "" = the library's own
  // ATen operators the plugin's own kernels run in this plan (OperatorKernel::op, from
  // Precision::kernels()); empty = LibTorch's kernels only. Since ABI 10.0.
  std::vector<std::string> kernels;
  std::vector<std::string> reasons;  // one line per decision, e.g. "bf16: AVX512_BF16 present"
};

// Whether the plugin's operator kernels may run on the calling thread now: the host's answer (the
// applied plan, the training step's configuration), read by the kernel on every call. A plain
// function: cheap and safe from any thread. Since ABI 10.0.
using KernelGate = bool (*)() noexcept;

// An ATen operator kernel of the plugin's for a device LibTorch already has (the CPU): it
// replaces LibTorch's kernel for the inputs it handles, while the gate is open, and calls
// LibTorch's own kernel (at::cpu::<op>, never the dispatcher: that would find it again) for
// every other input. Its results equal LibTorch's (values, indices, dtypes, layouts), so
// autograd's formulas and every caller see no difference but the time. The host registers it
// (register_impl with a torch::Library it made for namespace "aten" and LibTorch's dispatch key
// of the device) when a plan lists `op`, and removes it before the plugin unloads; plugins
// never register anything with LibTorch themselves. Since ABI 10.0.
struct OperatorKernel {
  std::string op;    // the ATen operator, as in PrecisionPlan::kernels ("max_pool2d_with_indices")
  std::string what;  // for people: which inputs it takes and how ("2x2 stride 2, fp32 NCHW, AVX2")
  std::function<void(torch::Library& library, KernelGate gate)> register_impl;
};

// Which PrecisionPlan value a read-back value shows, so the host can compare it with the plan
// (`accelkit report --apply`). other: shown, never compared. Since ABI 4.0.
enum class PlanField { other, threads, tf32, autocast, autocast_dtype, loss_scaling, blas_kernels };

// One value as LibTorch reports it after apply(), for `report --apply`.
struct AppliedValue {
  std::string key;    // "num_threads", "autocast_cpu_enabled", "autocast_cpu_dtype", ...
  std::string value;  // as read back from LibTorch, not as intended
  PlanField field = PlanField::other;  // what of the plan it shows (the key is for people)
};

class Precision {
 public:
  virtual ~Precision() = default;
  // Decide. An explicit request the device cannot honour is refused with not_supported (never
  // silently downgraded); invalid_argument for a request no device could honour (threads < 0).
  virtual Result<PrecisionPlan> plan(const PrecisionRequest& request) noexcept = 0;
  // Set LibTorch's state to `plan`.
  virtual Status apply(const PrecisionPlan& plan) noexcept = 0;
  // Read every value apply() sets back from LibTorch.
  virtual Result<std::vector<AppliedValue>> read_back() noexcept = 0;
  // The operator kernels a plan of this device may list (PrecisionPlan::kernels). Since ABI 10.0.
  virtual std::vector<OperatorKernel> kernels() noexcept { return {}; }
};

}  // namespace accelkit
