// Which of a plugin's AdamW implementations to use (Optimizer::adamw_implementations): with one,
// that one; with several (the CPU plugin's own kernel and LibTorch's at::_fused_adamw_, say),
// the fastest on this device, measured once per device, versions and thread count and cached
// beside the auto-tuner's decisions (<cache dir>/adamw/<key>.json). Never the slower one by
// assumption: where LibTorch's kernel wins on this machine, LibTorch's is used.
//
// The measurement: every implementation steps the same fresh parameters (4 x [1024, 2048]
// fp32, 8.4M elements, 235 MB of AdamW traffic per step: well outside the caches, as a real
// model's optimizer step is) 3 times untimed, then 7 times each, alternating, synchronised;
// the medians decide. About a second on a 2-core CPU.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/Device.h>

#include "accelkit/sdk/optimizer.hpp"

namespace accelkit {

// Who runs the forwards of a model whose optimizer make_adamw creates: the program (its own
// loop, which may evaluate the model outside rt->autocast()), or one of accelkit's own loops
// (accelkit bench's variant, accelkit train), which runs every forward under autocast().
// master_weights = auto turns master weights on for the second only.
enum class ForwardOwner : std::uint8_t { program, accelkit };

class Context;

struct AdamWImplChoice {
  std::string name;         // the implementation's name (AdamWConfig::implementation)
  std::string description;
  std::string origin;       // "only" (one offered) | "benchmark" | "cache"
  std::string why;          // one line, with the figures
  std::vector<std::pair<std::string, double>> median_ms;  // per implementation, as measured
  std::string created;      // UTC, ISO 8601, when it was measured
  std::string cache_file;   // the entry read or written; empty when not cached
};

// Chooses among `optimizer`'s implementations on `device` (threads as LibTorch has them now).
// use_cache: read and write the cache entry (the autotune_cache setting); a corrupt or stale
// entry is reported and measured again. Throws std::runtime_error when an implementation the
// plugin offers cannot be created or does not run.
AdamWImplChoice choose_adamw_implementation(const Context& context, Optimizer& optimizer, c10::Device device,
                                            bool use_cache);

// The cached choice for this context's device at `threads` (0 = LibTorch's current count),
// without measuring; origin "" when there is none (or only one implementation: origin "only").
AdamWImplChoice cached_adamw_implementation(const Context& context, Optimizer& optimizer, int threads = 0);

}  // namespace accelkit
