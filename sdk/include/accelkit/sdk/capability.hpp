// The capability vocabulary: typed keys every plugin and the core agree on, plus free
// key/values for anything vendor-specific ("isa" = "avx2,avx512f", "compute_capability" = "9.0").
//
// A config's `require = ["bf16", "fused_adamw"]` names typed keys, or free keys whose value is
// neither empty nor "false"/"0". Typed keys are only ever appended (ABI minor); their
// spelling is part of the contract (JSON output, config files).
//
// Thread-safety: plain values.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelkit {

enum class Capability {
  fp32,                // plain fp32 compute
  tf32,                // TF32 matmul/convolution (NVIDIA SM >= 8.0)
  bf16,                // bf16 compute fast enough to be the autocast dtype
  fp16,                // fp16 compute (tensor cores, or native half arithmetic)
  fp8,                 // fp8 matmul (SM >= 8.9)
  fused_adamw,         // the plugin's Optimizer has a fused AdamW
  graph_capture,       // whole-step graph capture and replay
  sdpa_flash,          // flash scaled-dot-product attention
  sdpa_mem_efficient,  // memory-efficient scaled-dot-product attention
  memory_stats,        // allocator / device memory statistics
  thermal,             // a temperature sensor the Monitor reads
  power,               // a power or energy sensor the Monitor reads
  utilisation,         // a utilisation counter the Monitor reads
  master_weights,      // the fused AdamW keeps fp32 master weights for a bf16 model
  int8_linear,         // dynamic INT8 Linear through LibTorch's quantized engine (ABI 5.1);
                       // the free keys below say which engine and how
  reference_device,    // a reference/simulated device for backend authors (ABI 6.0): `auto`
                       // never selects it; it runs only where --device names it
  fused_sgd,           // the plugin's Optimizer has a fused SGD (Optimizer::create_sgd, ABI 8.0)
};

inline constexpr std::pair<Capability, std::string_view> kCapabilityNames[] = {
    {Capability::fp32, "fp32"},
    {Capability::tf32, "tf32"},
    {Capability::bf16, "bf16"},
    {Capability::fp16, "fp16"},
    {Capability::fp8, "fp8"},
    {Capability::fused_adamw, "fused_adamw"},
    {Capability::graph_capture, "graph_capture"},
    {Capability::sdpa_flash, "sdpa_flash"},
    {Capability::sdpa_mem_efficient, "sdpa_mem_efficient"},
    {Capability::memory_stats, "memory_stats"},
    {Capability::thermal, "thermal"},
    {Capability::power, "power"},
    {Capability::utilisation, "utilisation"},
    {Capability::master_weights, "master_weights"},
    {Capability::int8_linear, "int8_linear"},
    {Capability::reference_device, "reference_device"},
    {Capability::fused_sgd, "fused_sgd"},
};

inline std::string_view to_string(Capability c) noexcept {
  for (const auto& [cap, name] : kCapabilityNames)
    if (cap == c) return name;
  return "unknown";
}

inline std::optional<Capability> capability_from_string(std::string_view s) noexcept {
  for (const auto& [cap, name] : kCapabilityNames)
    if (name == s) return cap;
  return std::nullopt;
}

// Operation routing, a convention on free keys (no interface change): a device that should
// not run an operation class itself names where it should run instead, and why.
//   "route.<op>"     = "cpu"     <op> is an operation class name ("fft", "sort", "scatter",
//                                ... see accelkit::OpClass in the core); "cpu" is the only target
//   "route.<op>.why" = one line  shown by `accelkit report` ("rocFFT is unreliable on gfx1010")
// The core reads these through Runtime::route(OpClass); a config's [routing] table overrides them.
inline constexpr const char* kRoutePrefix = "route.";
inline constexpr const char* kRouteReasonSuffix = ".why";

// With Capability::int8_linear, the plugin's choices for Runtime::quantize:
//   "int8.engine"       = LibTorch's quantized engine, as at::QEngine prints lower-cased
//                         ("x86", "fbgemm", "onednn"); one of at::globalContext().supportedQEngines()
//   "int8.reduce_range" = "true" when activations must be quantized to 7 bits (GEMMs without
//                         VNNI-class instructions saturate 16-bit intermediates), else "false"
inline constexpr const char* kInt8EngineKey = "int8.engine";
inline constexpr const char* kInt8ReduceRangeKey = "int8.reduce_range";

// Dimension alignment (accelkit's check_alignment), a convention on free keys:
//   "align.<dtype>" = N   Linear/conv/embedding sizes run fastest as multiples of N elements
//                         in <dtype> ("fp32", "bf16", "fp16", "int8"): tensor-core tiles on a
//                         GPU, the vector width on a CPU. No key: nothing is checked.
inline constexpr const char* kAlignPrefix = "align.";

// Collective communication for data-parallel training, a convention on free keys:
//   "collectives" = the c10d backends this device's tensors are all-reduced with, preferred
//                   first, comma-separated ("gloo" on a CPU, "nccl" on CUDA and on ROCm, whose
//                   LibTorch names RCCL "nccl"). No key: the device takes no part in one.
inline constexpr const char* kCollectivesKey = "collectives";

// What one device can do. `typed` has no duplicates (add() keeps it so).
struct CapabilitySet {
  std::vector<Capability> typed;
  std::map<std::string, std::string> extra;  // free key/values, shown as "key=value"

  CapabilitySet& add(Capability c) {
    if (!has(c)) typed.push_back(c);
    return *this;
  }
  CapabilitySet& set(std::string key, std::string value) {
    extra[std::move(key)] = std::move(value);
    return *this;
  }
  bool has(Capability c) const noexcept {
    return std::find(typed.begin(), typed.end(), c) != typed.end();
  }
  // A typed key by name, or a free key whose value is not "", "0" or "false".
  bool has(std::string_view name) const {
    if (auto c = capability_from_string(name)) return has(*c);
    auto it = extra.find(std::string(name));
    return it != extra.end() && !it->second.empty() && it->second != "0" && it->second != "false";
  }
};

}  // namespace accelkit
