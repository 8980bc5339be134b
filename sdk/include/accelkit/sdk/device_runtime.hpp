// DeviceRuntime: a device LibTorch does not know (an NPU, an FPGA card, a simulator), brought
// by a plugin. The plugin brings memory, copies and, optionally, native kernels; the host
// registers the device with LibTorch as its PrivateUse1 device type - one device guard, one
// allocator, the allocation/view/copy kernels, a CPU fallback for every other operator - and
// forwards to this table. Plugins never register anything with LibTorch themselves (a second
// PrivateUse1 fallback registered from a static initialiser terminates the process inside
// dlopen). Since ABI 6.0.
//
// A plugin declares such a device in its probe with DeviceInfo::torch_device =
// "privateuseone:<index>" and returns the table from Device::runtime(). The host activates at
// most one such plugin per process (LibTorch has one PrivateUse1 backend), before any
// autograd work; the device is then "<backend>:<index>" on LibTorch >= 2.1 and
// "privateuseone:<index>" on older ones.
//
// The host checks the table when it activates it and refuses one whose required entry is
// empty, naming the entry (missing_entries below).
//
// Memory is the plugin's: the host never dereferences a device pointer; every byte moves
// through `copy`, and native kernels receive device tensors.
//
// Thread-safety: every entry may be called from any thread (LibTorch's intra-op threads,
// the autograd engine's device thread), concurrently.
// Errors: an entry reports failure by throwing (std::exception); the host turns it into a
// LibTorch error naming the plugin and the entry.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace torch { class Library; }

namespace accelkit {

enum class CopyKind { host_to_device, device_to_host, device_to_device };

inline const char* to_string(CopyKind k) noexcept {
  switch (k) {
    case CopyKind::host_to_device: return "host_to_device";
    case CopyKind::device_to_host: return "device_to_host";
    case CopyKind::device_to_device: return "device_to_device";
  }
  return "?";
}

// A kernel the plugin runs natively: the ATen operator it implements ("mm", "addmm.out") and
// the function that registers it. The host calls `register_impl` once, with a torch::Library
// it created for namespace "aten" and dispatch key PrivateUse1 (library.impl(op, fn)).
struct NativeKernel {
  std::string op;
  std::function<void(torch::Library& library)> register_impl;
};

struct DeviceRuntime {
  // Required. LibTorch's name for the device type on LibTorch >= 2.1 ("hostmem": tensors on
  // "hostmem:0"); lower-case letters, digits and '_', starting with a letter.
  std::string backend;
  // Required. Devices of this type; indexes are 0 .. count - 1.
  std::function<int()> device_count;
  // Required. `bytes` (> 0) of device memory on device `index`; nullptr when it has none left.
  std::function<void*(std::size_t bytes, int index)> allocate;
  // Required. Frees what allocate returned (never nullptr).
  std::function<void(void* ptr, int index)> deallocate;
  // Required. Moves `bytes` between host and device memory, or within the device; synchronous
  // for the host (the bytes have arrived when it returns).
  std::function<void(void* dst, const void* src, std::size_t bytes, CopyKind kind, int index)> copy;
  // Optional. Waits for the device's queued work (a synchronous device leaves it empty); what
  // LibTorch's c10::Stream::synchronize() on the device calls.
  std::function<void(int index)> synchronize;
  // Optional. Kernels the plugin runs natively; every other operator falls back to the CPU.
  std::vector<NativeKernel> kernels;
};

// The required entries `r` lacks, by name ("backend", "copy", ...); empty when it is complete.
inline std::vector<std::string> missing_entries(const DeviceRuntime& r) {
  std::vector<std::string> missing;
  if (r.backend.empty()) missing.emplace_back("backend");
  if (!r.device_count) missing.emplace_back("device_count");
  if (!r.allocate) missing.emplace_back("allocate");
  if (!r.deallocate) missing.emplace_back("deallocate");
  if (!r.copy) missing.emplace_back("copy");
  for (const auto& k : r.kernels)
    if (k.op.empty() || !k.register_impl) missing.emplace_back("kernels[" + (k.op.empty() ? "?" : k.op) + "]");
  return missing;
}

}  // namespace accelkit
