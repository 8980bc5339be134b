// LibTorch's PrivateUse1 device type across versions, for the host's new-device registration
// (core/src/new_device.cpp). Apart from torch_compat.hpp because only that code needs these
// headers.
//   Allocator:  allocate() const with no copy_data before 2.3; non-const allocate() and a pure
//               copy_data() from 2.3. DeviceAllocator below hides the difference.
//   Name:       c10::register_privateuse1_backend("name") from 2.1 (tensors on "name:0");
//               before, the device is "privateuseone:0" and has no name of its own.
//   Hooks:      at::PrivateUse1HooksInterface (RegisterPrivateUse1HooksInterface) from 2.1,
//               reshaped around AcceleratorHooksInterface in 2.5: registered here from 2.5 (the
//               device count, "is available", the device of a pointer, lazy device init, and
//               the default generator: the CPU's, since the device runs the CPU's kernels).
//   Autocast:   AutocastPrivateUse1 from 2.1 - not registered yet (the device runs fp32).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>

#include "accelkit/sdk/torch_compat.hpp"

#define ACCELKIT_HAS_PRIVATEUSE1_NAME ACCELKIT_TORCH_AT_LEAST(2, 1)
#define ACCELKIT_HAS_PRIVATEUSE1_HOOKS ACCELKIT_TORCH_AT_LEAST(2, 5)

#if ACCELKIT_HAS_PRIVATEUSE1_HOOKS
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#endif

namespace accelkit::compat {

inline constexpr bool kPrivateUse1HasName = ACCELKIT_HAS_PRIVATEUSE1_NAME;
inline constexpr bool kPrivateUse1HasHooks = ACCELKIT_HAS_PRIVATEUSE1_HOOKS;

// An allocator that forwards to do_allocate / do_copy, whatever the LibTorch.
class DeviceAllocator : public c10::Allocator {
 public:
#if ACCELKIT_TORCH_AT_LEAST(2, 3)
  c10::DataPtr allocate(std::size_t n) override { return do_allocate(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { do_copy(dest, src, count); }
#else
  c10::DataPtr allocate(std::size_t n) const override { return do_allocate(n); }
#endif

 protected:
  virtual c10::DataPtr do_allocate(std::size_t n) const = 0;
  // Device-to-device bytes (LibTorch calls it to clone storages from 2.3 on).
  virtual void do_copy(void* dest, const void* src, std::size_t count) const = 0;
};

// Names the PrivateUse1 device type `name` (from 2.1); false where this LibTorch cannot, or a
// name is registered already (then *current says which).
inline bool register_privateuse1_name(const std::string& name, std::string* current) {
#if ACCELKIT_HAS_PRIVATEUSE1_NAME
  if (c10::is_privateuse1_backend_registered()) {
    if (current) *current = c10::get_privateuse1_backend();
    return c10::get_privateuse1_backend() == name;
  }
  c10::register_privateuse1_backend(name);
  if (current) *current = name;
  return true;
#else
  (void)name;
  if (current) *current = "privateuseone";
  return false;
#endif
}

// LibTorch's device string for PrivateUse1 device `index`: "<name>:<index>" once named,
// "privateuseone:<index>" before.
inline std::string privateuse1_device_string(int index) {
  return c10::DeviceTypeName(c10::DeviceType::PrivateUse1, /*lower_case=*/true) + ":" + std::to_string(index);
}

#if ACCELKIT_HAS_PRIVATEUSE1_HOOKS
class PrivateUse1Hooks final : public at::PrivateUse1HooksInterface {
 public:
  explicit PrivateUse1Hooks(std::function<int()> count) : count_(std::move(count)) {}
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return count_() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex index) const override { return index >= 0 && index < count_(); }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(count_()); }
  at::Device getDeviceFromPtr(void* /*data*/) const override { return at::Device(c10::DeviceType::PrivateUse1, 0); }
  void init() const override {}
  // The device's operators run on the CPU's kernels: it draws from the CPU's generator, so a
  // seed gives the device the CPU's random numbers (at::manual_seed seeds it through here).
  const at::Generator& getDefaultGenerator(c10::DeviceIndex /*index*/) const override {
    return at::detail::getDefaultCPUGenerator();
  }

 private:
  std::function<int()> count_;
};
#endif

// Registers hooks answering LibTorch's questions about the device (from 2.5); false before.
// Once per process; the hooks live as long as the process.
inline bool register_privateuse1_hooks(std::function<int()> count) {
#if ACCELKIT_HAS_PRIVATEUSE1_HOOKS
  static PrivateUse1Hooks* hooks = new PrivateUse1Hooks(std::move(count));
  at::RegisterPrivateUse1HooksInterface(hooks);
  return true;
#else
  (void)count;
  return false;
#endif
}

}  // namespace accelkit::compat
