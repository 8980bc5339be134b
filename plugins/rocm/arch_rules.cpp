#include "arch_rules.hpp"

namespace accelkit::rocm {

ArchRules arch_rules(const GfxTarget& target) {
  ArchRules r;
  r.family = target.family();
  const std::string arch = target.name() + " (" + to_string(r.family) + ")";
  switch (r.family) {
    case ArchFamily::cdna2:
    case ArchFamily::cdna3:
    case ArchFamily::cdna4:
      r.dtype = Dtype::bf16;
      r.bf16 = r.fp16 = true;
      r.reasons.push_back("bf16: " + arch + " has bf16 matrix cores (MFMA)");
      break;
    case ArchFamily::rdna3:
    case ArchFamily::rdna3_5:
    case ArchFamily::rdna4:
      r.dtype = Dtype::bf16;
      r.bf16 = r.fp16 = true;
      r.reasons.push_back("bf16: " + arch + " has bf16 WMMA instructions");
      break;
    case ArchFamily::rdna2:
    case ArchFamily::cdna1:
    case ArchFamily::gcn5:
      r.dtype = Dtype::fp16;
      r.fp16 = true;
      r.reasons.push_back("fp16 with loss scaling: " + arch + " has fast fp16 but no fast bf16");
      break;
    case ArchFamily::rdna1:
      r.fft_on_cpu = true;
      r.disable_hipblaslt = true;
      r.memory_fraction = 0.8;
      r.reasons.push_back("fp32 only: " + arch + " has no ROCm kernels of its own; half-precision "
                          "paths are unreliable on it");
      r.reasons.push_back("fft -> cpu: rocFFT is unreliable on " + arch);
      r.reasons.push_back("hipBLASLt off: it has no kernels for " + arch);
      r.reasons.push_back("memory fraction 0.8: leaves headroom on a card that also drives displays "
                          "and fragments under the caching allocator");
      break;
    case ArchFamily::unknown:
      r.reasons.push_back("fp32: " + target.name() + " is an architecture these rules do not know");
      break;
  }
  return r;
}

std::vector<EnvSetting> arch_environment(const ArchRules& rules) {
  std::vector<EnvSetting> env;
  if (rules.disable_hipblaslt) {
    const std::string why = std::string("hipBLASLt off for ") + to_string(rules.family);
    env.push_back({"TORCH_BLAS_PREFER_HIPBLASLT", "0", why + " (LibTorch >= 2.3)"});
    env.push_back({"DISABLE_ADDMM_HIP_LT", "1", why + " (addmm in LibTorch 2.1-2.2)"});
  }
  return env;
}

}  // namespace accelkit::rocm
