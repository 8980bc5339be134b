// Precision: which dtype, TF32, loss scaling, thread count and host BLAS kernels a device
// should use, why, and how to apply that to LibTorch and read it back.
//
// Thread-safety: plan() is pure and may be called from any thread. apply() changes LibTorch
// process-wide state (threads, TF32, BLAS kernels) and the calling thread's autocast state;
// call it from the thread that will run the model, while no other work runs on it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "accelkit/status.hpp"

namespace accelkit {

// What the user asked for. "auto" leaves the choice to the plugin's rules.
struct PrecisionRequest {
  std::string precision = "auto";  // auto | fp32 | bf16 | fp16
  std::string tf32 = "auto";       // auto | on | off
  int threads = 0;                 // 0 = the plugin's choice
  // Host BLAS kernels (CPU): "auto" lets the plugin replace kernels narrower than the CPU
  // runs; "library" keeps the BLAS library's own choice.
  std::string blas = "auto";
};

// A decision, with the reason for each value.
struct PrecisionPlan {
  std::string dtype = "fp32";    // compute dtype under autocast: fp32 | bf16 | fp16
  bool autocast = false;         // run forward under autocast with `dtype`
  bool tf32 = false;             // TF32 for fp32 matmul/convolution
  bool loss_scaling = false;     // dynamic loss scaling (fp16)
  int threads = 0;               // intra-op threads to set; 0 = leave LibTorch's default
  std::string blas_kernels;      // host BLAS kernel set to select ("SkylakeX"); "" = the library's own
  std::vector<std::string> reasons;  // one line per decision, e.g. "bf16: AVX512_BF16 present"
};

// One value as LibTorch reports it after apply(), for `report --apply`.
// Which PrecisionPlan value a read-back value shows, so the host can compare it with the plan
// (`accelkit report --apply`). other: shown, never compared. Since ABI 4.0.
enum class PlanField { other, threads, tf32, autocast, autocast_dtype, loss_scaling, blas_kernels };

struct AppliedValue {
  std::string key;    // "num_threads", "autocast_cpu_enabled", "autocast_cpu_dtype", ...
  std::string value;  // as read back from LibTorch, not as intended
  PlanField field = PlanField::other;  // what of the plan it shows (the key is for people)
};

class Precision {
 public:
  virtual ~Precision() = default;
  // Decide. An explicit request the device cannot honour is refused with invalid_argument or
  // not_supported (never silently downgraded).
  virtual Result<PrecisionPlan> plan(const PrecisionRequest& request) noexcept = 0;
  // Set LibTorch's state to `plan`.
  virtual Status apply(const PrecisionPlan& plan) noexcept = 0;
  // Read every value apply() sets back from LibTorch.
  virtual Result<std::vector<AppliedValue>> read_back() noexcept = 0;
};

}  // namespace accelkit
