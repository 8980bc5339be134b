#include "accelkit/new_device.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>
#include <torch/torch.h>

#include "accelkit/device_error.hpp"
#include "accelkit/sdk/torch_compat_new_device.hpp"

namespace accelkit::new_device {
namespace {

constexpr const char* kDeclaredPrefix = "privateuseone:";
constexpr auto kType = c10::DeviceType::PrivateUse1;

// Everything lives as long as the process: LibTorch keeps pointers to the guard, the
// allocator and the kernels until exit.
struct Registry {
  std::mutex mu;
  bool active = false;
  std::string plugin;
  DeviceRuntime rt;  // immutable once active
  std::string torch_type;
  std::vector<std::string> native;
  std::vector<std::string> notes;
  std::vector<std::unique_ptr<torch::Library>> libraries;
  std::mutex fallback_mu;
  std::map<std::string, std::uint64_t> fallbacks;
};

Registry& reg() {
  static Registry* r = new Registry;  // never destroyed: LibTorch may call in during exit
  return *r;
}

const DeviceRuntime& rt() { return reg().rt; }

// An entry of the plugin's table failed: a LibTorch error naming the plugin and the entry.
[[noreturn]] void entry_failed(const char* entry, const char* what) {
  TORCH_CHECK(false, "accelkit: the ", reg().plugin, " plugin's ", entry, " failed: ", what);
}

template <class F>
auto call_entry(const char* entry, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    entry_failed(entry, e.what());
  } catch (...) {
    entry_failed(entry, "unknown exception");
  }
}

thread_local c10::DeviceIndex t_current = 0;

int device_count_or_zero() {
  try {
    return reg().active ? rt().device_count() : 0;
  } catch (...) {
    return 0;
  }
}

void copy_bytes(void* dst, const void* src, std::size_t bytes, CopyKind kind, int index) {
  if (bytes == 0) return;
  call_entry("copy", [&] { rt().copy(dst, src, bytes, kind, index); });
}

// ---- the device guard --------------------------------------------------------------------
class Guard final : public compat::DeviceGuardBase {
 public:
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kType, t_current); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kType, "accelkit: expected a ", c10::DeviceTypeName(kType, true), " device, got ", d);
    if (d.has_index()) t_current = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.has_index()) t_current = d.index();
  }
  c10::Stream getStream(c10::Device d) const noexcept override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count_or_zero());
  }
  // c10::Stream::synchronize() on the device: the plugin's synchronize, when it has one (a
  // synchronous device has nothing queued).
  void synchronizeStream(const c10::Stream& s) const override {
    if (reg().active && rt().synchronize) rt().synchronize(s.device_index());
  }
  // The whole device (at::accelerator::synchronizeDevice): the same, its one stream.
  void synchronize_device(int index) const override {
    if (reg().active && rt().synchronize) rt().synchronize(index);
  }
};

// ---- the allocator -----------------------------------------------------------------------
struct Allocation {
  void* ptr;
  int index;
};

void free_allocation(void* ctx) {
  auto* a = static_cast<Allocation*>(ctx);
  try {
    rt().deallocate(a->ptr, a->index);
  } catch (...) {
    // A free that fails cannot be reported from a deleter; the plugin's own accounting sees it.
  }
  delete a;
}

class Allocator final : public compat::DeviceAllocator {
 protected:
  c10::DataPtr do_allocate(std::size_t n) const override {
    const int index = t_current;
    const c10::Device device(kType, static_cast<c10::DeviceIndex>(index));
    if (n == 0) return c10::DataPtr(nullptr, nullptr, nullptr, device);
    void* p = call_entry("allocate", [&] { return rt().allocate(n, index); });
    TORCH_CHECK(p != nullptr, "accelkit: the ", reg().plugin, " plugin is out of memory on ",
                c10::DeviceTypeName(kType, true), ":", index, " (asked for ", n, " bytes)");
    return c10::DataPtr(p, new Allocation{p, index}, &free_allocation, device);
  }
  void do_copy(void* dest, const void* src, std::size_t count) const override {
    copy_bytes(dest, src, count, CopyKind::device_to_device, t_current);
  }
};

Allocator& allocator() {
  static Allocator* a = new Allocator;
  return *a;
}

c10::DispatchKeySet device_keys() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

struct IndexGuard {
  explicit IndexGuard(c10::optional<c10::Device> d) : saved(t_current) {
    if (d && d->type() == kType && d->has_index()) t_current = d->index();
  }
  explicit IndexGuard(const at::Tensor& t) : saved(t_current) {
    if (t.device().type() == kType) t_current = t.device().index();
  }
  ~IndexGuard() { t_current = saved; }
  c10::DeviceIndex saved;
};

// ---- the allocation / view / copy kernels --------------------------------------------------
at::Tensor k_empty(at::IntArrayRef size, c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                   c10::optional<at::Device> device, c10::optional<bool> /*pin_memory*/,
                   c10::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout || *layout == at::kStrided, "accelkit: ", reg().plugin, " tensors are strided only");
  IndexGuard g(device);
  return at::detail::empty_generic(size, &allocator(), device_keys(), c10::dtype_or_default(dtype), memory_format);
}

at::Tensor k_empty_strided(at::IntArrayRef size, at::IntArrayRef stride, c10::optional<at::ScalarType> dtype,
                           c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                           c10::optional<bool> /*pin_memory*/) {
  TORCH_CHECK(!layout || *layout == at::kStrided, "accelkit: ", reg().plugin, " tensors are strided only");
  IndexGuard g(device);
  return at::detail::empty_strided_generic(size, stride, &allocator(), device_keys(), c10::dtype_or_default(dtype));
}

at::Tensor k_as_strided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                        c10::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor k_view(const at::Tensor& self, at::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor k_reshape_alias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

// Elements of storage a strided tensor reaches from its storage offset.
int64_t extent_of(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t extent = 1;
  for (int64_t d = 0; d < t.dim(); ++d) extent += (t.size(d) - 1) * t.stride(d);
  return extent;
}

// A host buffer holding the part of device tensor t's storage it reaches (from its offset).
at::Tensor region_to_host(const at::Tensor& t) {
  at::Tensor buf = at::empty({extent_of(t)}, t.options().device(at::kCPU));
  copy_bytes(buf.data_ptr(), t.data_ptr(), static_cast<std::size_t>(buf.numel()) * t.element_size(),
             CopyKind::device_to_host, t.device().index());
  return buf;
}

at::Tensor to_host(const at::Tensor& t) {
  return region_to_host(t).as_strided(t.sizes(), t.strides(), 0);
}

// dst (on the device) = src (on the host), with LibTorch's copy_ rules (dtype, broadcast).
void from_host(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.is_contiguous() && src.sizes() == dst.sizes() && src.scalar_type() == dst.scalar_type()) {
    at::Tensor c = src.contiguous();
    copy_bytes(dst.data_ptr(), c.data_ptr(), dst.nbytes(), CopyKind::host_to_device, dst.device().index());
    return;
  }
  at::Tensor buf = region_to_host(dst);
  buf.as_strided(dst.sizes(), dst.strides(), 0).copy_(src);
  copy_bytes(dst.data_ptr(), buf.data_ptr(), static_cast<std::size_t>(buf.numel()) * dst.element_size(),
             CopyKind::host_to_device, dst.device().index());
}

at::Tensor k_copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  const bool src_dev = self.device().type() == kType, dst_dev = dst.device().type() == kType;
  if (src_dev && !dst_dev) {
    TORCH_CHECK(dst.is_cpu(), "accelkit: copies between ", reg().plugin, " and ", dst.device(), " go through the CPU");
    dst.copy_(to_host(self));
  } else if (!src_dev && dst_dev) {
    TORCH_CHECK(self.is_cpu(), "accelkit: copies between ", self.device(), " and ", reg().plugin,
                " go through the CPU");
    from_host(dst, self);
  } else if (self.is_contiguous() && dst.is_contiguous() && self.sizes() == dst.sizes() &&
             self.scalar_type() == dst.scalar_type() && self.device() == dst.device()) {
    IndexGuard g(dst);
    copy_bytes(dst.data_ptr(), self.data_ptr(), dst.nbytes(), CopyKind::device_to_device, dst.device().index());
  } else {
    from_host(dst, to_host(self));
  }
  return dst;
}

const at::Tensor& k_resize(const at::Tensor& self, at::IntArrayRef size, c10::optional<at::MemoryFormat> format) {
  int64_t numel = 1;
  for (int64_t s : size) {
    TORCH_CHECK(s >= 0, "accelkit: resize_ to a negative size");
    numel *= s;
  }
  const std::size_t needed = static_cast<std::size_t>(self.storage_offset() + numel) * self.element_size();
  const c10::Storage& storage = self.storage();
  if (needed > storage.nbytes()) {
    IndexGuard g(self);
    c10::DataPtr fresh = allocator().allocate(needed);
    if (storage.nbytes() > 0 && storage.data() != nullptr)
      copy_bytes(fresh.get(), storage.data(), storage.nbytes(), CopyKind::device_to_device, self.device().index());
    storage.set_data_ptr_noswap(std::move(fresh));
    storage.set_nbytes(needed);
  }
  self.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  if (format && *format != at::MemoryFormat::Preserve && *format != at::MemoryFormat::Contiguous)
    self.unsafeGetTensorImpl()->empty_tensor_restride(*format);
  return self;
}

at::Tensor k_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.device().type() == kType) k_resize(dst, self.sizes(), c10::nullopt);
  else dst.resize_(self.sizes());
  return k_copy_from(self, dst, false);
}

// set_data (module->to(device)) swaps a parameter's implementation for one on the device.
bool k_compatible_shallow_copy(const at::Tensor& /*self*/, const at::Tensor& /*from*/) { return true; }

// ---- the CPU fallback ----------------------------------------------------------------------
void count_fallback(const std::string& op) {
  Registry& r = reg();
  std::lock_guard<std::mutex> lock(r.fallback_mu);
  ++r.fallbacks[op];
}

// LibTorch sends a convolution on a device it does not know to convolution_overrideable and
// its backward to convolution_backward_overrideable, whose defaults throw: the boxed fallback
// never sees them. Run on CPU copies like the fallback does, and counted with it.
at::Tensor on_host(const at::Tensor& t) { return t.defined() ? t.to(at::kCPU) : t; }
at::Tensor on_device_of(const at::Tensor& t, const at::Tensor& like) { return t.defined() ? t.to(like.device()) : t; }

at::Tensor k_convolution(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                         at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                         at::IntArrayRef output_padding, int64_t groups) {
  count_fallback("aten::convolution_overrideable");
  c10::optional<at::Tensor> host_bias;
  if (bias && bias->defined()) host_bias = on_host(*bias);
  return on_device_of(at::convolution(on_host(input), on_host(weight), host_bias, stride, padding, dilation, transposed,
                                      output_padding, groups),
                      input);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> k_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  count_fallback("aten::convolution_backward_overrideable");
  // The bias has one element per output channel: weight is (out, in/groups, ...), or
  // (in, out/groups, ...) when transposed.
  const std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
  auto [gi, gw, gb] = at::convolution_backward(on_host(grad_output), on_host(input), on_host(weight),
                                               output_mask[2] ? at::OptionalIntArrayRef(bias_sizes) : c10::nullopt,
                                               stride, padding, dilation, transposed, output_padding, groups,
                                               output_mask);
  return {on_device_of(gi, input), on_device_of(gw, input), on_device_of(gb, input)};
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  // A view's result must share the device tensor's memory; run on the CPU it would be a copy.
  for (const auto& ret : op.schema().returns())
    TORCH_CHECK(ret.alias_info() == nullptr || ret.alias_info()->isWrite(), "accelkit: ", name.name,
                name.overload_name.empty() ? "" : ".", name.overload_name, " is a view operator, which cannot fall "
                "back to the CPU (its result would not share the device tensor's memory), and the ", reg().plugin,
                " plugin does not run it: implement it in the plugin (or express it through as_strided)");
  count_fallback(name.overload_name.empty() ? name.name : name.name + "." + name.overload_name);
  // The fallback hands the CPU kernel out= tensors of the caller's placeholder shape, and
  // LibTorch warns on every resize of one ("An output with one or more elements was resized");
  // that is the fallback's plumbing, not the program's: dropped, other warnings kept.
  std::vector<std::string> warnings;
  try {
    compat::WarningCollector collect;
    at::native::cpu_fallback(op, stack);
    warnings = collect.messages();
  } catch (const c10::Error& e) {
    // Name the operator and the device: a view cannot fall back, an operator may have no CPU
    // kernel, or the program's own arguments are wrong (LibTorch's words follow).
    TORCH_CHECK(false, "accelkit: ", name.name, name.overload_name.empty() ? "" : ".", name.overload_name,
                " is not run by the ", reg().plugin, " plugin itself and failed in the CPU fallback: ",
                e.what_without_backtrace());
  }
  for (const auto& w : warnings)
    if (w.find("was resized since it had shape") == std::string::npos) TORCH_WARN(w);
}

void register_with_libtorch(Registry& r) {
  auto make = [&](const char* ns, c10::DispatchKey key) -> torch::Library& {
    r.libraries.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, ns, key, __FILE__, __LINE__));
    return *r.libraries.back();
  };
  torch::Library& aten = make("aten", c10::DispatchKey::PrivateUse1);
  aten.impl("empty.memory_format", TORCH_FN(k_empty));
  aten.impl("empty_strided", TORCH_FN(k_empty_strided));
  aten.impl("as_strided", TORCH_FN(k_as_strided));
  aten.impl("view", TORCH_FN(k_view));
  aten.impl("_reshape_alias", TORCH_FN(k_reshape_alias));
  aten.impl("resize_", TORCH_FN(k_resize));
  aten.impl("_copy_from", TORCH_FN(k_copy_from));
  aten.impl("_copy_from_and_resize", TORCH_FN(k_copy_from_and_resize));
  aten.impl("_has_compatible_shallow_copy_type", TORCH_FN(k_compatible_shallow_copy));
  // set_ to a storage (serialization reads a tensor's storage through it): LibTorch's own
  // implementation is device-neutral as long as the storage is already large enough.
  aten.impl("set_.source_Storage_storage_offset", TORCH_FN(at::native::set_storage_cpu_));
  aten.impl("set_.source_Storage", TORCH_FN(at::native::set_));
  // A plugin that runs convolutions itself registers these two; the CPU copies are the default.
  auto plugin_runs = [&](const char* op) {
    return std::any_of(r.rt.kernels.begin(), r.rt.kernels.end(), [&](const NativeKernel& k) { return k.op == op; });
  };
  if (!plugin_runs("convolution_overrideable")) aten.impl("convolution_overrideable", TORCH_FN(k_convolution));
  if (!plugin_runs("convolution_backward_overrideable"))
    aten.impl("convolution_backward_overrideable", TORCH_FN(k_convolution_backward));
  make("aten", c10::DispatchKey::AutogradPrivateUse1)
      .impl("_has_compatible_shallow_copy_type", TORCH_FN(k_compatible_shallow_copy));
  for (const NativeKernel& k : r.rt.kernels) {
    try {
      k.register_impl(aten);
    } catch (const std::exception& e) {
      throw DeviceUnavailableError(r.plugin + " plugin: registering its kernel " + k.op + " failed: " + e.what());
    }
    r.native.push_back(k.op);
  }
  make("_", c10::DispatchKey::PrivateUse1).fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
  for (auto& lib : compat::register_privateuse1_autocast()) r.libraries.push_back(std::move(lib));
}

// One backward on the device. The autograd engine sizes its per-device threads once, at the
// program's first backward: if that ran before the guard existed, this fails.
void check_autograd(int index, const std::string& plugin) {
  try {
    at::Tensor a = at::ones({2}, at::TensorOptions().device(c10::Device(kType, static_cast<c10::DeviceIndex>(index))))
                       .requires_grad_();
    (a * 2).sum().backward();
    TORCH_CHECK(a.grad().defined(), "no gradient");
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    throw DeviceUnavailableError(
        plugin + " plugin: a backward on its device fails (" + what.substr(0, 200) +
        "). LibTorch's autograd engine counts its devices once, at the program's first backward: start "
        "accelkit (Runtime::start / Context::create) before the program runs any backward.");
  }
}

}  // namespace

int declared_index(const DeviceInfo& info) {
  const std::string& t = info.torch_device;
  const std::size_t n = std::strlen(kDeclaredPrefix);
  if (t.compare(0, n, kDeclaredPrefix) != 0 || t.size() == n) return -1;
  for (std::size_t i = n; i < t.size(); ++i)
    if (t[i] < '0' || t[i] > '9') return -1;
  return std::stoi(t.substr(n));
}

bool declares(const DeviceInfo& info) { return declared_index(info) >= 0; }

namespace {

std::string missing_text(const std::vector<std::string>& missing) {
  std::string list;
  for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
  return std::string("lacks the required entr") + (missing.size() == 1 ? "y " : "ies ") + list;
}

}  // namespace

std::string table_problem(Plugin& plugin, const ProbeReport& report) {
  for (std::size_t i = 0; i < report.devices.size(); ++i) {
    const DeviceInfo& info = report.devices[i];
    if (!declares(info)) continue;
    Result<std::shared_ptr<Device>> device = plugin.open(i);
    const std::string what = "declares a new device type (" + info.id + ")";
    if (!device.ok() || !device.value())
      return what + " that does not open: " + (device.ok() ? std::string("no device returned") : device.status().message());
    Result<DeviceRuntime> table = device.value()->runtime();
    if (!table.ok()) return what + " but brings no device runtime: " + table.status().message();
    const std::vector<std::string> missing = missing_entries(table.value());
    if (!missing.empty()) return what + " whose device runtime " + missing_text(missing);
  }
  return "";
}

std::string activate(const std::string& plugin, Device& device) {
  Registry& r = reg();
  const int index = declared_index(device.info());
  if (index < 0) throw DeviceUnavailableError(plugin + " plugin: " + device.info().id + " is not a new device type");
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.active) {
    if (r.plugin != plugin)
      throw DeviceUnavailableError(plugin + " plugin: this process already runs " + r.plugin +
                                   "'s device as LibTorch's one new device type (PrivateUse1); one per process");
    return compat::privateuse1_device_string(index);
  }
  Result<DeviceRuntime> got = device.runtime();
  if (!got.ok()) throw DeviceUnavailableError(plugin + " plugin: " + device.info().id + " declares a new device type but "
                                              "brings no device runtime: " + got.status().message());
  const std::vector<std::string> missing = missing_entries(got.value());
  if (!missing.empty()) throw DeviceUnavailableError(plugin + " plugin: its device runtime " + missing_text(missing));
  const DeviceRuntime& table = got.value();
  for (char c : table.backend)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      throw DeviceUnavailableError(plugin + " plugin: backend name '" + table.backend +
                                   "' (lower-case letters, digits and '_' only)");
  const int count = table.device_count();
  if (index >= count)
    throw DeviceUnavailableError(plugin + " plugin: device " + std::to_string(index) + " of " + std::to_string(count));

  r.rt = table;
  r.plugin = plugin;
  r.active = true;  // the guard and allocator answer from here on
  try {
    static c10::impl::DeviceGuardImplRegistrar guard_registrar(kType, new Guard);
    c10::SetAllocator(kType, &allocator());
    std::string registered;
    if (compat::register_privateuse1_name(table.backend, &registered)) {
      r.torch_type = table.backend;
    } else {
      r.torch_type = registered;
      r.notes.push_back(compat::kPrivateUse1HasName
                            ? "its PrivateUse1 device is named '" + registered + "' already in this process"
                            : "no name of its own for the device before LibTorch 2.1: it is privateuseone:N");
    }
    if (!compat::register_privateuse1_hooks(device_count_or_zero))
      r.notes.push_back("no device hooks before LibTorch 2.5: no generator of its own");
    if (!compat::kPrivateUse1HasAutocast)
      r.notes.push_back("no autocast for the device before LibTorch 2.4: it computes in fp32");
    register_with_libtorch(r);
  } catch (const DeviceUnavailableError&) {
    throw;
  } catch (const std::exception& e) {
    throw DeviceUnavailableError(plugin + " plugin: registering its device with LibTorch failed: " + e.what());
  }
  check_autograd(index, plugin);
  reset_fallback_counts();
  return compat::privateuse1_device_string(index);
}

State state() {
  Registry& r = reg();
  std::lock_guard<std::mutex> lock(r.mu);
  State s;
  s.active = r.active;
  s.plugin = r.plugin;
  s.backend = r.rt.backend;
  s.torch_type = r.torch_type;
  s.native_kernels = r.native;
  s.notes = r.notes;
  return s;
}

std::vector<FallbackCount> fallback_counts() {
  Registry& r = reg();
  std::vector<FallbackCount> out;
  {
    std::lock_guard<std::mutex> lock(r.fallback_mu);
    for (const auto& [op, n] : r.fallbacks) out.push_back({op, n});
  }
  std::stable_sort(out.begin(), out.end(), [](const FallbackCount& a, const FallbackCount& b) { return a.calls > b.calls; });
  return out;
}

void reset_fallback_counts() {
  Registry& r = reg();
  std::lock_guard<std::mutex> lock(r.fallback_mu);
  r.fallbacks.clear();
}

}  // namespace accelkit::new_device
