// What an Apple GPU (MPS) should run, from the values the plugin probes: chip (sysctl
// machdep.cpu.brand_string / hw.model), macOS version (kern.osproductversion), memory
// (hw.memsize), whether LibTorch has MPS, and LibTorch's version. Portable and LibTorch-free,
// so it is unit-tested on any OS against recorded values.
//
// Rules (LibTorch versions from the PyTorch changes that added each feature):
//   fp16 autocast        MPS autocast exists from LibTorch 2.5 (fp16 only);
//   bf16                 MPS refuses bf16 before macOS 14 ("MPS BFloat16 is only supported on
//                        MacOS 14 or newer"); bf16 autocast on MPS from LibTorch 2.6. Offered on
//                        M2 and newer only: M1's GPU has no bf16 arithmetic and emulates it.
//                        fp16 stays the default dtype (as fast and wider supported).
//   fused Adam/AdamW     MPS kernels for _fused_adam(w)_ from LibTorch 2.4.
//   Intel Macs           MPS runs on their AMD GPUs: fp16, no bf16.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelkit::mps {

enum class ChipFamily { m1, m2, m3, m4, m5_or_newer, intel, unknown };
const char* to_string(ChipFamily f) noexcept;  // "M1", ..., "Intel", "unknown"

struct Version {
  int major = 0;
  int minor = 0;
  bool at_least(int ma, int mi) const noexcept { return major > ma || (major == ma && minor >= mi); }
};
// "14.6.1" -> {14, 6}; nullopt when it is not a version.
std::optional<Version> parse_version(std::string_view text);

// Recorded or probed values.
struct MpsProbeValues {
  std::string brand;        // machdep.cpu.brand_string: "Apple M2 Pro"
  std::string hw_model;     // hw.model: "Mac14,12"
  std::string os_version;   // kern.osproductversion: "14.6.1"
  std::uint64_t memory_bytes = 0;  // hw.memsize (unified memory)
  bool mps_available = false;      // LibTorch: at::hasMPS()
  Version torch;                   // LibTorch major.minor
};

// "Apple M3 Max" -> m3, "Apple M4" -> m4, "Intel(R) Core(TM) i9..." -> intel.
ChipFamily chip_family(std::string_view brand);

struct MpsCapabilities {
  ChipFamily chip = ChipFamily::unknown;
  bool usable = false;       // MPS available to LibTorch
  std::string dtype = "fp32";  // autocast dtype under precision=auto
  bool autocast = false;     // LibTorch has MPS autocast
  bool fp16 = false;
  bool bf16 = false;
  bool fused_adamw = false;  // LibTorch's fused Adam/AdamW has MPS kernels
  std::vector<std::string> reasons;  // one line per decision
};

MpsCapabilities mps_capabilities(const MpsProbeValues& values);

}  // namespace accelkit::mps
