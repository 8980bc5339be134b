// LibTorch's device-generic accelerator API (ATen/DeviceAccelerator.h), for the torch plugin:
// the version differences in one place (torch_compat.hpp's rule).
//
//   Found:     at::accelerator::getAccelerator, deviceCount, synchronizeDevice from 2.6; none before
//              (Debian 12's 1.13): accelerator_api() is false and every call throws.
//   Memory:    getDeviceStats, getMemoryInfo, resetPeakStats, emptyCache over the device's
//              caching allocator, and getDeviceCapability (the dtypes the device computes):
//              used from 2.13, the first release whose headers accelkit checked them in; before
//              it memory() throws saying so. For a device type whose allocator is not a
//              DeviceAllocator (a PrivateUse1 device with a plain allocator) LibTorch throws,
//              and its message is what the caller reports.
//   Autocast:  device-generic from 2.4 (compat::set_autocast_enabled(DeviceType, ...)).
//   Graphs:    at::accelerator::Graph over a backend's registered GraphImplInterface from 2.12.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include "accelkit/sdk/torch_compat.hpp"

#define ACCELKIT_HAS_ACCELERATOR_API ACCELKIT_TORCH_AT_LEAST(2, 6)
#define ACCELKIT_HAS_ACCELERATOR_MEMORY ACCELKIT_TORCH_AT_LEAST(2, 13)
#define ACCELKIT_HAS_ACCELERATOR_GRAPH ACCELKIT_TORCH_AT_LEAST(2, 12)

#if ACCELKIT_HAS_ACCELERATOR_API
#include <ATen/DeviceAccelerator.h>
#endif
#if ACCELKIT_HAS_ACCELERATOR_GRAPH
#include <ATen/accelerator/Graph.h>
#include <ATen/core/GraphImplInterface.h>
#endif

namespace accelkit::compat {

inline constexpr bool accelerator_api() { return ACCELKIT_HAS_ACCELERATOR_API; }
inline constexpr bool accelerator_memory_api() { return ACCELKIT_HAS_ACCELERATOR_MEMORY; }
inline constexpr bool accelerator_graph_api() { return ACCELKIT_HAS_ACCELERATOR_GRAPH; }

inline std::string libtorch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
}

// The accelerator type of this process's LibTorch (CUDA, XPU, HIP, MPS, MTIA or a registered
// PrivateUse1 backend), or none.
inline std::optional<c10::DeviceType> accelerator_type() {
#if ACCELKIT_HAS_ACCELERATOR_API
  return at::accelerator::getAccelerator(false);
#else
  return std::nullopt;
#endif
}

inline int accelerator_device_count() {
#if ACCELKIT_HAS_ACCELERATOR_API
  return static_cast<int>(at::accelerator::deviceCount());
#else
  TORCH_CHECK(false, "at::accelerator needs LibTorch >= 2.6 (this is ", libtorch_version(), ")");
#endif
}

inline void accelerator_synchronize(int index) {
#if ACCELKIT_HAS_ACCELERATOR_API
  at::accelerator::synchronizeDevice(static_cast<c10::DeviceIndex>(index));
#else
  (void)index;
  TORCH_CHECK(false, "at::accelerator needs LibTorch >= 2.6 (this is ", libtorch_version(), ")");
#endif
}

struct AcceleratorMemory {
  std::uint64_t free = 0, total = 0;                // getMemoryInfo
  std::uint64_t allocated = 0, peak = 0, reserved = 0;  // getDeviceStats (the aggregate pool)
};

inline AcceleratorMemory accelerator_memory(int index) {
#if ACCELKIT_HAS_ACCELERATOR_MEMORY
  const auto i = static_cast<c10::DeviceIndex>(index);
  AcceleratorMemory m;
  const auto [free_bytes, total_bytes] = at::accelerator::getMemoryInfo(i);
  m.free = free_bytes;
  m.total = total_bytes;
  const auto stats = at::accelerator::getDeviceStats(i);
  constexpr auto all = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  m.allocated = static_cast<std::uint64_t>(stats.allocated_bytes[all].current);
  m.peak = static_cast<std::uint64_t>(stats.allocated_bytes[all].peak);
  m.reserved = static_cast<std::uint64_t>(stats.reserved_bytes[all].current);
  return m;
#else
  (void)index;
  TORCH_CHECK(false, "the device-generic memory API is used from LibTorch 2.13 (this is ", libtorch_version(), ")");
#endif
}

inline void accelerator_reset_peak(int index) {
#if ACCELKIT_HAS_ACCELERATOR_MEMORY
  at::accelerator::resetPeakStats(static_cast<c10::DeviceIndex>(index));
#else
  (void)index;
  TORCH_CHECK(false, "the device-generic memory API is used from LibTorch 2.13 (this is ", libtorch_version(), ")");
#endif
}

inline void accelerator_empty_cache() {
#if ACCELKIT_HAS_ACCELERATOR_MEMORY
  at::accelerator::emptyCache();
#else
  TORCH_CHECK(false, "the device-generic memory API is used from LibTorch 2.13 (this is ", libtorch_version(), ")");
#endif
}

// The dtypes the device computes (getDeviceCapability); nullopt where LibTorch cannot say.
inline std::optional<std::vector<c10::ScalarType>> accelerator_dtypes(int index) {
#if ACCELKIT_HAS_ACCELERATOR_MEMORY
  std::vector<c10::ScalarType> out;
  at::accelerator::getDeviceCapability(static_cast<c10::DeviceIndex>(index))
      .forEachSupportedScalarType([&out](c10::ScalarType t) { out.push_back(t); });
  return out;
#else
  (void)index;
  return std::nullopt;
#endif
}

// Whether LibTorch has autocast for `type` through the device-generic API (2.4+): CUDA, XPU,
// HIP, MPS (2.5) and a registered PrivateUse1 backend.
inline constexpr bool accelerator_autocast(c10::DeviceType type) {
  switch (type) {
    case c10::DeviceType::CUDA: return true;
    case c10::DeviceType::MPS: return autocast_available(c10::DeviceType::MPS);
    case c10::DeviceType::XPU:
    case c10::DeviceType::HIP:
    case c10::DeviceType::PrivateUse1: return ACCELKIT_TORCH_AT_LEAST(2, 4);
    default: return false;
  }
}

// Whether a graph implementation is registered for `type` (at::accelerator::Graph, 2.12+).
inline bool accelerator_graph_registered(c10::DeviceType type) {
#if ACCELKIT_HAS_ACCELERATOR_GRAPH
  return at::has_graph_impl(type);
#else
  (void)type;
  return false;
#endif
}

// One graph of the accelerator (at::accelerator::Graph over the type's registered
// implementation, 2.12+): begin/end a capture on the current stream, instantiate, replay. Every
// call throws c10::Error before 2.12 or where no implementation is registered.
class AcceleratorGraph {
 public:
  AcceleratorGraph() {
#if ACCELKIT_HAS_ACCELERATOR_GRAPH
    graph_ = std::make_unique<at::accelerator::Graph>(/*keep_graph=*/false);
#else
    TORCH_CHECK(false, "device-generic graph capture needs LibTorch >= 2.12 (this is ", libtorch_version(), ")");
#endif
  }
#if ACCELKIT_HAS_ACCELERATOR_GRAPH
  void capture_begin() { graph_->capture_begin(); }
  void capture_end() { graph_->capture_end(); }
  void instantiate() { graph_->instantiate(); }
  void replay() { graph_->replay(); }
  void reset() { graph_->reset(); }

 private:
  std::unique_ptr<at::accelerator::Graph> graph_;
#else
  void capture_begin() {}
  void capture_end() {}
  void instantiate() {}
  void replay() {}
  void reset() {}
#endif
};

// A graph implementation made of functions, registered for a device type at run time (the
// registry's key is LibTorch's name for the type then: a PrivateUse1 backend renamed by
// register_privateuse1_backend has its new name). For tests and backends without a class of
// their own. Returns false before LibTorch 2.12 (no graph interface), registering nothing.
struct GraphFunctions {
  std::function<void()> capture_begin, capture_end, instantiate, replay, reset;
};

#if ACCELKIT_HAS_ACCELERATOR_GRAPH
class FunctionGraphImpl final : public at::GraphImplInterface {
 public:
  explicit FunctionGraphImpl(GraphFunctions f) : f_(std::move(f)) {}
  void capture_begin(at::MempoolId_t, at::GraphCaptureMode) override { f_.capture_begin(); }
  void capture_end() override { f_.capture_end(); }
  void instantiate() override { f_.instantiate(); }
  void replay() override { f_.replay(); }
  void reset() override { f_.reset(); }
  at::MempoolId_t pool() const override { return {0, 0}; }
  void enable_debug_mode() override {}
  void debug_dump(const std::string&) override {}

 private:
  GraphFunctions f_;
};
#endif

inline bool register_graph_functions(c10::DeviceType type, std::function<GraphFunctions()> make) {
#if ACCELKIT_HAS_ACCELERATOR_GRAPH
  at::GraphImplRegistry()->Register(
      c10::DeviceTypeName(type, /*lower_case=*/false),
      [make = std::move(make)](at::GraphImplArgs) -> std::unique_ptr<at::GraphImplInterface> {
        return std::make_unique<FunctionGraphImpl>(make());
      });
  return true;
#else
  (void)type, (void)make;
  return false;
#endif
}

}  // namespace accelkit::compat
