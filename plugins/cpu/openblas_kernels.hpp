// OpenBLAS's kernel set ("core"): a DYNAMIC_ARCH OpenBLAS (Debian's) picks one when it loads,
// from the CPU's family and model. A release older than the CPU does not know the model and
// falls back to a generic set: Debian bookworm's 0.3.21 runs its SSE3 "Prescott" kernels on
// CPUs it has no entry for, and LibTorch's fp32 matmul is then ~4x slower than with the
// AVX-512 "SkylakeX" kernels the same library carries (bench/NOTES-bench.md).
//
// plan_openblas_kernels (pure) decides from the ISA flags and what the library reports; the
// live functions find OpenBLAS in the process with dlsym and switch its kernels with the
// library's own entry points (OPENBLAS_CORETYPE, read at gotoblas_dynamic_init).
//
// Thread-safety: select_openblas_kernels changes process-wide state. Call it while no BLAS
// call runs (between training steps); the live functions serialise among themselves.
#pragma once

#include <string>
#include <vector>

#include <accelkit/sdk/precision.hpp>

#include "isa.hpp"

namespace accelkit::cpu {

struct OpenBlasState {
  bool present = false;         // OpenBLAS with DYNAMIC_ARCH entry points is in the process
  std::string library_choice;   // the kernel set OpenBLAS picked itself at load ("Prescott")
  std::string current;          // the kernel set in use now
  std::string env_coretype;     // OPENBLAS_CORETYPE as the process started ("" = unset)
  std::vector<std::string> kernel_sets;  // the sets this build carries that we know ("Haswell", ...)
  std::string absent_reason;    // why present is false
};

struct BlasKernelPlan {
  std::string kernels;  // the set to select; "" = leave OpenBLAS's own choice
  std::string reason;   // one line for PrecisionPlan::reasons
};

// Rank of a kernel set by the widest vector ISA it uses: 3 AVX-512, 2 AVX2, 1 AVX, 0 SSE or
// unknown. Case-insensitive.
int openblas_kernel_rank(const std::string& kernels);

// The widest kernel set among `available` the CPU can run ("" = none fits). AVX-512 F+BW:
// SkylakeX (sgemm is the same in Cooperlake); AVX2: Zen on AMD, Haswell otherwise.
std::string best_openblas_kernels(const IsaFlags& isa, const std::string& vendor,
                                  const std::vector<std::string>& available);

// request: automatic (replace a set narrower than the CPU allows) or library (keep OpenBLAS's
// choice). A user's OPENBLAS_CORETYPE is always kept.
BlasKernelPlan plan_openblas_kernels(BlasKernels request, const OpenBlasState& state,
                                     const IsaFlags& isa, const std::string& vendor);

// This process's OpenBLAS (cached after the first call: the library's own choice is what it
// reports before anything here switched it).
OpenBlasState openblas_state();

// Switches to `kernels` ("" = back to OpenBLAS's own choice; without OpenBLAS nothing to do).
// Returns "" on success, else why not (no OpenBLAS, unknown set, the library reports another
// set afterwards).
std::string select_openblas_kernels(const std::string& kernels);

// The kernel set in use now; "" when there is no OpenBLAS.
std::string openblas_current_kernels();

}  // namespace accelkit::cpu
