// LibTorch's PrivateUse1 device type across versions, for the host's new-device registration
// (core/new_device/src/new_device.cpp). Apart from torch_compat.hpp because only that code needs these
// headers.
//   Allocator:  allocate() const with no copy_data before 2.3; non-const allocate() and a pure
//               copy_data() from 2.3. DeviceAllocator below hides the difference.
//   Name:       c10::register_privateuse1_backend("name") from 2.1 (tensors on "name:0");
//               before, the device is "privateuseone:0" and has no name of its own.
//   Hooks:      at::PrivateUse1HooksInterface (RegisterPrivateUse1HooksInterface) from 2.1,
//               reshaped around AcceleratorHooksInterface in 2.5: registered here from 2.5 (the
//               device count, "is available", the device of a pointer, lazy device init, and
//               the default generator: the CPU's, since the device runs the CPU's kernels).
//   Autocast:   AutocastPrivateUse1 from 2.1, but LibTorch's wrappers take a device type (and
//               set_autocast_enabled/dtype one) from 2.4: registered here from 2.4 with the
//               lists LibTorch uses on CPU and CUDA (matmuls and convolutions in the autocast
//               dtype; losses, norms and exp/log-like functions in fp32; the rest falls through).
//   Guard:      DeviceGuardImplInterface::synchronizeDevice (what at::accelerator::synchronizeDevice
//               calls) exists from 2.6 at the latest: DeviceGuardBase forwards it to
//               synchronize_device() there; before, nothing calls it.
#pragma once

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "accelkit/sdk/torch_compat.hpp"

#define ACCELKIT_HAS_PRIVATEUSE1_NAME ACCELKIT_TORCH_AT_LEAST(2, 1)
#define ACCELKIT_HAS_PRIVATEUSE1_HOOKS ACCELKIT_TORCH_AT_LEAST(2, 5)
#define ACCELKIT_HAS_PRIVATEUSE1_AUTOCAST ACCELKIT_TORCH_AT_LEAST(2, 4)

#include <torch/library.h>

#if ACCELKIT_HAS_PRIVATEUSE1_AUTOCAST
#include <ATen/Operators.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#endif

#if ACCELKIT_HAS_PRIVATEUSE1_HOOKS
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#endif

namespace accelkit::compat {

inline constexpr bool kPrivateUse1HasName = ACCELKIT_HAS_PRIVATEUSE1_NAME;
inline constexpr bool kPrivateUse1HasHooks = ACCELKIT_HAS_PRIVATEUSE1_HOOKS;
inline constexpr bool kPrivateUse1HasAutocast = ACCELKIT_HAS_PRIVATEUSE1_AUTOCAST;

// A device guard whose whole-device synchronisation (where LibTorch has it) is
// synchronize_device().
class DeviceGuardBase : public c10::impl::DeviceGuardImplInterface {
 public:
  virtual void synchronize_device(int index) const = 0;
#if ACCELKIT_TORCH_AT_LEAST(2, 6)
  void synchronizeDevice(const c10::DeviceIndex index) const override { synchronize_device(static_cast<int>(index)); }
#endif
};

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

#if ACCELKIT_HAS_PRIVATEUSE1_AUTOCAST
namespace detail {
// Registers operator Op (an at::_ops struct) for AutocastPrivateUse1 under `policy`.
template <at::autocast::CastPolicy policy, class Op>
void autocast_op(torch::Library& m) {
  using Sig = typename Op::schema;
  std::string name = Op::name;
  if (std::strlen(Op::overload_name) > 0) name += std::string(".") + Op::overload_name;
  m.impl(name.c_str(), &at::autocast::WrapFunction<policy, c10::DeviceType::PrivateUse1, Sig, Sig, &Op::call>::type::call);
}
}  // namespace detail
#endif

// Registers LibTorch's autocast for the PrivateUse1 device (from 2.4): the libraries holding
// the registrations, to keep for the process's life; empty where this LibTorch cannot.
inline std::vector<std::unique_ptr<torch::Library>> register_privateuse1_autocast() {
  std::vector<std::unique_ptr<torch::Library>> libs;
#if ACCELKIT_HAS_PRIVATEUSE1_AUTOCAST
  using at::autocast::CastPolicy;
  namespace ops = at::_ops;
  // Operators outside the lists run as they come; LibTorch itself may already say so.
  if (!c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(c10::DispatchKey::AutocastPrivateUse1)) {
    libs.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, "_", c10::DispatchKey::AutocastPrivateUse1,
                                                    __FILE__, __LINE__));
    libs.back()->fallback(torch::CppFunction::makeFallthrough());
  }
  libs.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::AutocastPrivateUse1,
                                                  __FILE__, __LINE__));
  torch::Library& m = *libs.back();
  constexpr auto low = CastPolicy::lower_precision_fp;
  detail::autocast_op<low, ops::conv1d>(m);
  detail::autocast_op<low, ops::conv2d>(m);
  detail::autocast_op<low, ops::conv3d>(m);
  detail::autocast_op<low, ops::conv_transpose1d>(m);
  detail::autocast_op<low, ops::conv_transpose2d_input>(m);
  detail::autocast_op<low, ops::conv_transpose3d_input>(m);
  detail::autocast_op<low, ops::convolution>(m);
  detail::autocast_op<low, ops::_convolution>(m);
  detail::autocast_op<low, ops::prelu>(m);
  detail::autocast_op<low, ops::addmm>(m);
  detail::autocast_op<low, ops::addmv>(m);
  detail::autocast_op<low, ops::addr>(m);
  detail::autocast_op<low, ops::matmul>(m);
  detail::autocast_op<low, ops::einsum>(m);
  detail::autocast_op<low, ops::mm>(m);
  detail::autocast_op<low, ops::mv>(m);
  detail::autocast_op<low, ops::linear>(m);
  detail::autocast_op<low, ops::addbmm>(m);
  detail::autocast_op<low, ops::baddbmm>(m);
  detail::autocast_op<low, ops::bmm>(m);
  detail::autocast_op<low, ops::scaled_dot_product_attention>(m);
  constexpr auto fp32 = CastPolicy::fp32;
  detail::autocast_op<fp32, ops::acos>(m);
  detail::autocast_op<fp32, ops::asin>(m);
  detail::autocast_op<fp32, ops::cosh>(m);
  detail::autocast_op<fp32, ops::erfinv>(m);
  detail::autocast_op<fp32, ops::exp>(m);
  detail::autocast_op<fp32, ops::expm1>(m);
  detail::autocast_op<fp32, ops::log>(m);
  detail::autocast_op<fp32, ops::log10>(m);
  detail::autocast_op<fp32, ops::log2>(m);
  detail::autocast_op<fp32, ops::log1p>(m);
  detail::autocast_op<fp32, ops::reciprocal>(m);
  detail::autocast_op<fp32, ops::rsqrt>(m);
  detail::autocast_op<fp32, ops::sinh>(m);
  detail::autocast_op<fp32, ops::tan>(m);
  detail::autocast_op<fp32, ops::pow_Tensor_Scalar>(m);
  detail::autocast_op<fp32, ops::pow_Tensor_Tensor>(m);
  detail::autocast_op<fp32, ops::pow_Scalar>(m);
  detail::autocast_op<fp32, ops::softplus>(m);
  detail::autocast_op<fp32, ops::layer_norm>(m);
  detail::autocast_op<fp32, ops::native_layer_norm>(m);
  detail::autocast_op<fp32, ops::group_norm>(m);
  detail::autocast_op<fp32, ops::cosine_similarity>(m);
  detail::autocast_op<fp32, ops::nll_loss>(m);
  detail::autocast_op<fp32, ops::nll_loss2d>(m);
  detail::autocast_op<fp32, ops::kl_div>(m);
  detail::autocast_op<fp32, ops::l1_loss>(m);
  detail::autocast_op<fp32, ops::smooth_l1_loss>(m);
  detail::autocast_op<fp32, ops::huber_loss>(m);
  detail::autocast_op<fp32, ops::mse_loss>(m);
  detail::autocast_op<fp32, ops::binary_cross_entropy_with_logits>(m);
  detail::autocast_op<fp32, ops::dist>(m);
  detail::autocast_op<fp32, ops::cdist>(m);
#endif
  return libs;
}

}  // namespace accelkit::compat
