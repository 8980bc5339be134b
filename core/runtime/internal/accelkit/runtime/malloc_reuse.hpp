// Whether glibc's malloc keeps freed memory for the next step (setting malloc_reuse).
//
// A training step on a CPU allocates its activations and gradients afresh each step, megabytes
// each. glibc serves blocks that large with mmap and gives them back on free (its threshold
// rises only after such a free, at most to 32 MiB, and free memory at the top of its heap past
// twice that is returned), so a step may fault its pages in again and the kernel zero them; how
// often depends on the process's allocation history (bench/results/programs.md, "Freed memory
// kept": 5-7% of a ResNet-20 program's step on LibTorch 1.13, within noise on 2.13). With
// malloc_reuse, blocks up to kMallocReuseMmapThreshold come from the heap and up to
// kMallocReuseTrimThreshold of free memory at its top is kept, so the next step reuses them.
// Process-wide and for the process's life (mallopt has no undo); the CPU device's empty_cache()
// gives the kept memory back (malloc_trim).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "accelkit/settings.hpp"

namespace accelkit::detail {

inline constexpr std::size_t kMallocReuseMmapThreshold = std::size_t{256} << 20;  // 256 MiB
inline constexpr std::size_t kMallocReuseTrimThreshold = std::size_t{1} << 30;    // 1 GiB

// What the process's malloc is: glibc's (`glibc` true), or the file that defines malloc (an
// LD_PRELOADed jemalloc or tcmalloc, a static one) in `name`.
struct MallocFacts {
  bool glibc = false;
  std::string name;
};
MallocFacts malloc_in_use();

struct MallocReuseChoice {
  bool apply = false;
  std::string value;   // "on" or "off"
  std::string why;
};

// The decision for `want` (from `from`): auto applies it where tensors live in host memory
// (`host_device`), malloc is glibc's and the environment (`env`: getenv's contract) does not
// tune it already (GLIBC_TUNABLES' glibc.malloc.*, MALLOC_*_ variables); on applies it on any
// device and throws SettingsError where malloc is not glibc's; off never.
MallocReuseChoice choose_malloc_reuse(Toggle want, const std::string& from, bool host_device, const MallocFacts& malloc,
                                      const std::function<const char*(const char*)>& env);

// mallopt with the two thresholds; false (nothing changed that can be told) where glibc refused.
bool apply_malloc_reuse();

}  // namespace accelkit::detail
