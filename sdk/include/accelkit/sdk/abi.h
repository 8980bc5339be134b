/*
 * accelkit plugin ABI: the plain-C handshake.
 *
 * Every plugin exports
 *
 *     const AccelkitPluginInfo* accelkit_plugin_info(void);
 *
 * The host calls it right after opening the library and before touching anything C++. It
 * must return a pointer to static, immutable data (never NULL), do no allocation, start no
 * device, and never throw. The host reads the struct, compares it with its own build, and
 * refuses the plugin (with found-vs-expected in the message) unless all of these match:
 *
 *   - struct_size >= ACCELKIT_PLUGIN_INFO_MIN_SIZE (the size at ABI minor 0);
 *   - abi_major == ACCELKIT_ABI_MAJOR;
 *   - the LibTorch major.minor of torch_version equals the host's;
 *   - cxx_abi equals the host's C++ ABI tag (ACCELKIT_CXX_ABI_TAG in plugin.hpp).
 *
 * Versioning: fields are only ever appended, which raises ACCELKIT_ABI_MINOR; the host reads
 * an appended field only when struct_size says the plugin has it. Any change to a C++
 * interface in sdk/ (a virtual added, a struct changed) raises ACCELKIT_ABI_MAJOR.
 *
 * History:
 *   1.0  the first contract: Plugin, Device, Precision, Optimizer, Monitor.
 *   2.0  Device::capture_step() and CapturedStep (step_capture.hpp): whole-step graph
 *        capture with an eager fallback. A 1.x plugin is refused: its Device vtable has no
 *        capture_step slot.
 *   3.0  AdamWConfig::master_weights and Capability::master_weights: fp32 master weights
 *        for a bf16 model inside the fused AdamW. A 2.x plugin is refused: it would read the
 *        config without the field and ignore the request. Also PrecisionRequest::blas and
 *        PrecisionPlan::blas_kernels: the host BLAS kernel set, chosen and applied by the
 *        device's Precision. And the section ".accelkit_plugin" (ACCELKIT_PLUGIN_NOTE in
 *        plugin.hpp): the same handshake facts as text, which the host reads from the file
 *        before dlopen(), so that a plugin built against another LibTorch is refused without
 *        being loaded. Also Optimizer::adamw_implementations() and
 *        AdamWConfig::implementation: a plugin offers several AdamW implementations (its own
 *        kernel, LibTorch's at::_fused_adamw_) and the host picks the fastest by measurement.
 *   4.0  Typed facts the host acts on: DeviceKind::npu, and DeviceInfo::cores (physical
 *        cores of a CPU, SMs/CUs of a GPU). `auto` negotiation ranks by the declared kind,
 *        then score - no plugin name is special - and DeviceInfo::properties are display
 *        only. Plugin::optimizer_for(): a plugin contributes AdamW implementations to
 *        another plugin's device (replacing one interface without re-implementing the
 *        device). Device::optimizer() and Device::monitor() have defaults (not_supported),
 *        so a minimal plugin writes a device and its precision rules only.
 *        AppliedValue::field says which plan value a read-back value shows (the host
 *        compared keys by substring before). A 3.x plugin is
 *        refused: its DeviceInfo and Plugin vtable lack the new members.
 *   5.0  Typed requests and plans (the architecture step of 4.0, completed): PrecisionRequest
 *        carries std::optional<Dtype> precision (nullopt = the plugin's rules), Toggle tf32
 *        and BlasKernels blas; PrecisionPlan::dtype is a Dtype - enums in precision.hpp,
 *        strings before. A plugin switches over them and never sees a misspelt value: the
 *        host's typed settings refuse those first. A 4.x plugin is refused: it would read the
 *        strings' layout.
 *   5.1  Capability::int8_linear (appended) with the free keys "int8.engine" and
 *        "int8.reduce_range": the quantized engine Runtime::quantize uses. A 5.0 plugin loads
 *        and never claims it; a 5.1 plugin's claim reads "unknown" on a 5.0 host.
 *   6.0  A brand-new device type from a plugin: Device::runtime() returns a DeviceRuntime
 *        (device_runtime.hpp: memory, copies, native kernels) that the host registers as
 *        LibTorch's PrivateUse1 device; Capability::reference_device keeps a reference
 *        device out of `auto`. A 5.x plugin is refused: its Device vtable has no runtime()
 *        slot.
 *   7.0  Device memory through the contract: Device::memory() returns MemoryStats
 *        (memory.hpp: in use, peak, reserved, total, available, with their source) and
 *        Device::reset_peak_memory() starts a new peak, for MemoryScope, `bench` and `report`;
 *        Device::empty_cache() gives the allocator's cache back (the batch-size finder).
 *        A 6.x plugin is refused: its Device vtable has neither slot.
 *   8.0  Optimizer::create_sgd() with SGDConfig, and Capability::fused_sgd: a plugin's fused
 *        SGD (momentum, dampening, Nesterov, weight decay), state-compatible with
 *        torch::optim::SGD, which Runtime::make_sgd creates. A 7.x plugin is refused: its
 *        Optimizer vtable has no create_sgd slot.
 *   9.0  Device::process_group() with CollectiveRequest (collectives.hpp): a plugin makes the
 *        c10d process group for a collective backend the host cannot make itself (NCCL in a
 *        CUDA LibTorch's libtorch_cuda); support/process_group.hpp carries c10d's intrusive
 *        handles across. An 8.x plugin is refused: its Device vtable has no process_group slot.
 *  10.0  Operator kernels of a plugin's own for a device LibTorch has (precision.hpp):
 *        Precision::kernels() lists OperatorKernel entries, PrecisionPlan::kernels names those
 *        a plan runs, PrecisionRequest::kernels asks for them (the kernels setting); the host
 *        registers them with LibTorch's dispatcher and opens their KernelGate per thread and
 *        training step. A 9.x plugin is refused: its Precision vtable has no kernels slot and
 *        its plan lacks the field.
 *
 * Thread-safety: accelkit_plugin_info may be called from any thread, any number of times.
 */
#ifndef ACCELKIT_ABI_H
#define ACCELKIT_ABI_H

#include <stddef.h>
#include <stdint.h>

#define ACCELKIT_ABI_MAJOR 10u
#define ACCELKIT_ABI_MINOR 0u

/* Name of the C entry point and of the Boost.DLL alias of the C++ factory. */
#define ACCELKIT_PLUGIN_INFO_SYMBOL "accelkit_plugin_info"
#define ACCELKIT_PLUGIN_FACTORY_ALIAS "accelkit_create_plugin"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct AccelkitPluginInfo {
  /* sizeof(AccelkitPluginInfo) as the plugin was compiled. Since 1.0. */
  size_t struct_size;
  /* ACCELKIT_ABI_MAJOR / ACCELKIT_ABI_MINOR the plugin was compiled against. Since 1.0. */
  uint32_t abi_major;
  uint32_t abi_minor;
  /* Short unique plugin name, [a-z0-9_-]+ ("cpu", "cuda"); what --device and
   * ACCELKIT_PLUGINS_DISABLE match. Static storage, never NULL. Since 1.0. */
  const char* name;
  /* The plugin's own version ("1.2.0"). Static storage, never NULL. Since 1.0. */
  const char* version;
  /* LibTorch version of the headers it was built against, "major.minor.patch".
   * Static storage, never NULL. Since 1.0. */
  const char* torch_version;
  /* C++ ABI tag (see ACCELKIT_CXX_ABI_TAG). Static storage, never NULL. Since 1.0. */
  const char* cxx_abi;
  /* One line for humans ("CPU: AVX-512/AMX aware, RAPL power"). Static storage; may be
   * NULL. Since 1.0. */
  const char* description;
} AccelkitPluginInfo;

/* Size of the struct at ABI minor 0: a plugin reporting less is refused. */
#define ACCELKIT_PLUGIN_INFO_MIN_SIZE \
  (offsetof(AccelkitPluginInfo, description) + sizeof(const char*))

typedef const AccelkitPluginInfo* (*AccelkitPluginInfoFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* ACCELKIT_ABI_H */
