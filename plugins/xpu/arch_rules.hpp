// What an Intel GPU architecture should run: a pure function of the PCI device id.
//
// From Intel's documentation (the architecture overviews and the oneDNN developer guide's
// data-type support pages):
//   Xe-HPC  (Data Center GPU Max, "Ponte Vecchio"): XMX matrix engines with TF32, BF16, FP16
//           and INT8 -> bf16 autocast; TF32 for fp32 matmuls under tf32 = auto.
//   Xe-HPG  (Arc A-series, Arc Pro A, Data Center GPU Flex): XMX with BF16, FP16, INT8, INT4,
//           no TF32 -> bf16 autocast.
//   Xe2-HPG (Arc B-series), Xe2-LPG (Core Ultra 200V "Lunar Lake"): XMX with BF16, FP16, INT8,
//           INT4, INT2 -> bf16 autocast; Intel does not list TF32 for them.
//   Xe-LPG+ (Core Ultra 200H "Arrow Lake-H"): Xe-LPG with XMX -> bf16 autocast.
//   Xe-LPG  (Core Ultra series 1 "Meteor Lake", Arrow Lake-U/S): no XMX; its vector engines run
//           fp16 at twice the fp32 rate and have no bf16 arithmetic -> fp16 autocast with loss
//           scaling; bf16 not offered.
//   Xe-LP   (11th-14th gen Core iGPUs, Iris Xe MAX): not a PyTorch XPU target -> fp32, said.
//   Anything else: fp32, with the reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <accelkit/sdk/precision.hpp>

namespace accelkit::xpu {

enum class XeArch { unknown, xe_lp, xe_hpg, xe_hpc, xe_lpg, xe_lpg_plus, xe2_hpg, xe2_lpg };

const char* to_string(XeArch arch);

// The architecture of PCI device 8086:<device_id>; unknown for ids not in the table.
XeArch arch_of(std::uint32_t device_id);

struct XpuRules {
  XeArch arch = XeArch::unknown;
  Dtype dtype = Dtype::fp32;  // autocast dtype under precision = auto
  bool xmx = false;           // matrix engines (DPAS)
  bool bf16 = false;          // offered
  bool fp16 = false;          // offered
  bool tf32 = false;          // TF32 for fp32 matmuls offered
  bool integrated = false;    // an iGPU sharing the host's memory
  bool pytorch_target = false;  // a GPU PyTorch's XPU backend supports
  std::vector<std::string> reasons;  // one line per decision
};

XpuRules xpu_rules(std::uint32_t device_id);

// The marketing name of PCI device 8086:<device_id> for the common parts ("Intel Arc A770"),
// or "" (sysfs has no product name for Intel GPUs; Level Zero's name is used where it is loaded).
const char* product_name(std::uint32_t device_id);

}  // namespace accelkit::xpu
