// What an AMD architecture should run: the precision rules, and the workarounds for parts
// whose ROCm support is weak. A pure function of the gfx target.
//
//   CDNA2/3/4 (gfx90a, gfx94x, gfx950), RDNA3/3.5/4 (gfx11xx, gfx12xx): bf16 autocast.
//   RDNA2 (gfx103x), CDNA1 (gfx908), GCN5 (gfx906): fp16 autocast with loss scaling.
//   RDNA1 (gfx101x): fp32 only (ROCm does not ship kernels for it; it runs under an
//     HSA_OVERRIDE_GFX_VERSION of gfx1030 at best), FFT on the CPU, hipBLASLt off, and a
//     conservative caching-allocator memory fraction.
//   Anything else: fp32, with the reason.
#pragma once

#include <string>
#include <vector>

#include <accelkit/sdk/precision.hpp>

#include "gfx_target.hpp"

namespace accelkit::rocm {

struct ArchRules {
  ArchFamily family = ArchFamily::unknown;
  Dtype dtype = Dtype::fp32;      // autocast dtype under precision=auto
  bool bf16 = false;              // bf16 is fast enough to offer
  bool fp16 = false;              // fp16 is fast enough to offer
  bool fft_on_cpu = false;        // route FFTs to the CPU
  bool disable_hipblaslt = false; // keep LibTorch off hipBLASLt (environment, before first use)
  double memory_fraction = 1.0;   // caching-allocator limit; 1.0 = no limit
  std::vector<std::string> reasons;  // one line per decision
};

ArchRules arch_rules(const GfxTarget& target);

// The environment the rules ask for, set before the HIP runtime is first used.
struct EnvSetting {
  std::string name;
  std::string value;
  std::string why;
};
std::vector<EnvSetting> arch_environment(const ArchRules& rules);

}  // namespace accelkit::rocm
