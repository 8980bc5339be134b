// LibTorch's MPS allocator, through its MPS hooks (at::detail::getMPSHooks()), as far as this
// LibTorch has them. What differs:
//   1.13  no MPS hooks interface (ATen/detail/MPSHooksInterface.h is not there): at::hasMPS()
//         only; no allocator figures and no emptyCache.
//   2.x   the hooks, with emptyCache(), getCurrentAllocatedMemory() and
//         getDriverAllocatedMemory() (from 2.0), and getRecommendedMaxMemory() (later 2.x).
// Which members the interface has is read from the interface itself (as torch_compat_memory.hpp
// does), so no release number is relied on.
//
// Where LibTorch has no MPS (Linux; a macOS LibTorch built without it) the hooks are LibTorch's
// defaults: hasMPS() is false and every other member throws c10::Error. Ask mps_available()
// first; mps_allocator_figures() and mps_empty_cache() throw what the hooks throw, and
// mps_empty_cache() throws where the hooks have no emptyCache() (mps_empty_cache_available).
// Thread-safety: as LibTorch's MPS allocator (its figures are read under its own lock).
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include <c10/util/Exception.h>

#if __has_include(<ATen/detail/MPSHooksInterface.h>)
#include <ATen/detail/MPSHooksInterface.h>
#define ACCELKIT_HAS_MPS_HOOKS 1
#else
#include <ATen/Context.h>
#define ACCELKIT_HAS_MPS_HOOKS 0
#endif

namespace accelkit::compat {

// The MPS allocator's figures for this process, in bytes; nullopt where this LibTorch's hooks
// have no such member.
struct MpsAllocatorFigures {
  std::optional<std::uint64_t> current_allocated;  // getCurrentAllocatedMemory(): live tensors
  std::optional<std::uint64_t> driver_allocated;   // getDriverAllocatedMemory(): all Metal holds for the process
  std::optional<std::uint64_t> recommended_max;    // getRecommendedMaxMemory(): Metal's recommendedMaxWorkingSetSize
};

#if ACCELKIT_HAS_MPS_HOOKS

namespace detail {
template <typename H, typename = void>
struct mps_has_current : std::false_type {};
template <typename H>
struct mps_has_current<H, std::void_t<decltype(std::declval<const H&>().getCurrentAllocatedMemory())>>
    : std::true_type {};
template <typename H, typename = void>
struct mps_has_driver : std::false_type {};
template <typename H>
struct mps_has_driver<H, std::void_t<decltype(std::declval<const H&>().getDriverAllocatedMemory())>> : std::true_type {
};
template <typename H, typename = void>
struct mps_has_recommended : std::false_type {};
template <typename H>
struct mps_has_recommended<H, std::void_t<decltype(std::declval<const H&>().getRecommendedMaxMemory())>>
    : std::true_type {};
template <typename H, typename = void>
struct mps_has_empty_cache : std::false_type {};
template <typename H>
struct mps_has_empty_cache<H, std::void_t<decltype(std::declval<const H&>().emptyCache())>> : std::true_type {};

template <typename H>
MpsAllocatorFigures mps_figures(const H& hooks) {
  MpsAllocatorFigures f;
  if constexpr (mps_has_current<H>::value) f.current_allocated = hooks.getCurrentAllocatedMemory();
  if constexpr (mps_has_driver<H>::value) f.driver_allocated = hooks.getDriverAllocatedMemory();
  if constexpr (mps_has_recommended<H>::value) f.recommended_max = hooks.getRecommendedMaxMemory();
  return f;
}
template <typename H>
void mps_empty_cache(const H& hooks) {
  if constexpr (mps_has_empty_cache<H>::value) {
    hooks.emptyCache();
  } else {
    TORCH_CHECK(false, "this LibTorch's MPS hooks have no emptyCache()");
  }
}
}  // namespace detail

// This LibTorch's MPS hooks report the tensors' bytes (getCurrentAllocatedMemory).
inline constexpr bool mps_allocator_figures_available = detail::mps_has_current<at::MPSHooksInterface>::value;
// ... and give the allocator's cache back (emptyCache).
inline constexpr bool mps_empty_cache_available = detail::mps_has_empty_cache<at::MPSHooksInterface>::value;

// LibTorch in this process runs MPS.
inline bool mps_available() { return at::detail::getMPSHooks().hasMPS(); }
inline MpsAllocatorFigures mps_allocator_figures() { return detail::mps_figures(at::detail::getMPSHooks()); }
inline void mps_empty_cache() { detail::mps_empty_cache(at::detail::getMPSHooks()); }

#else  // LibTorch 1.13

inline constexpr bool mps_allocator_figures_available = false;
inline constexpr bool mps_empty_cache_available = false;
inline bool mps_available() { return at::hasMPS(); }
inline MpsAllocatorFigures mps_allocator_figures() { return {}; }
inline void mps_empty_cache() { TORCH_CHECK(false, "this LibTorch has no MPS hooks: no MPS emptyCache()"); }

#endif

}  // namespace accelkit::compat
