// hostmem: the reference plugin for a brand-new device type - the template for a hardware
// vendor's backend. Its device keeps tensors in a memory arena of its own (arena.hpp), not in
// the CPU allocator; the host registers it with LibTorch as the PrivateUse1 device from the
// table runtime() returns (memory, copies, native mm/addmm), and every other operator runs on
// the CPU through the host's fallback. sdk/README.md walks through it.
//
// Settings (environment, read when the device is opened):
//   ACCELKIT_HOSTMEM_ARENA_MIB  the arena's size (default 2048; address space, committed as used)
//   ACCELKIT_HOSTMEM_CHECK=1    checking mode: the arena is inaccessible outside the plugin's
//                               own copy and kernel calls, so a direct read of device memory
//                               faults (for tests and backend authors)
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "accelkit/sdk/device.hpp"
#include "accelkit/sdk/device_runtime.hpp"
#include "accelkit/sdk/plugin.hpp"
#include "accelkit/sdk/precision.hpp"
#include "accelkit/sdk/torch_compat_new_device.hpp"
#include "arena.hpp"

#ifndef HOSTMEM_NAME
#define HOSTMEM_NAME "hostmem"
#endif

namespace accelkit::hostmem {
namespace {

// Address space, committed only as it is used; within the plugin scan's memory limit.
constexpr std::size_t kDefaultArenaMib = 2048;

std::size_t arena_bytes() {
  if (const char* v = secure_getenv("ACCELKIT_HOSTMEM_ARENA_MIB")) {
    char* end = nullptr;
    const unsigned long long mib = std::strtoull(v, &end, 10);
    if (end && *end == '\0' && mib > 0 && mib <= (1ull << 24)) return static_cast<std::size_t>(mib) << 20;
  }
  return kDefaultArenaMib << 20;
}

bool checking_requested() {
  const char* v = secure_getenv("ACCELKIT_HOSTMEM_CHECK");
  return v && std::strcmp(v, "1") == 0;
}

// The one arena of this plugin (device 0), made when the device is first opened.
Arena& arena() {
  static Arena* a = new Arena(arena_bytes(), checking_requested());  // lives as long as the process
  return *a;
}

// A CPU view of a device tensor's memory, for use inside an Arena::Access only.
at::Tensor host_view(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
}

// Native kernels: LibTorch's own CPU kernels run directly on the arena's memory (no copies),
// so results are bit-equal to the CPU's.
[[maybe_unused]] at::Tensor hostmem_mm(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  Arena::Access access(arena());
  at::Tensor o = host_view(out);
  at::mm_out(o, host_view(a), host_view(b));
  return out;
}

[[maybe_unused]] at::Tensor hostmem_addmm(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2, const at::Scalar& beta,
                         const at::Scalar& alpha) {
  at::Tensor out = at::empty({m1.size(0), m2.size(1)}, m1.options());
  Arena::Access access(arena());
  at::Tensor o = host_view(out);
  at::addmm_out(o, host_view(self), host_view(m1), host_view(m2), beta, alpha);
  return out;
}

// bf16 through LibTorch's autocast for the device, which the host registers from LibTorch 2.4.
constexpr bool kAutocast = compat::kPrivateUse1HasAutocast;

class HostmemPrecision final : public Precision {
 public:
  Result<PrecisionPlan> plan(const PrecisionRequest& request) noexcept override {
    return guarded("hostmem plan", [&]() -> Result<PrecisionPlan> {
      const Dtype asked = request.precision.value_or(Dtype::fp32);
      if (asked == Dtype::fp16 || (asked == Dtype::bf16 && !kAutocast))
        return Status(StatusCode::not_supported,
                      std::string("hostmem computes in fp32") + (kAutocast ? " or bf16" : "") + " (asked " +
                          to_string(asked) + (kAutocast ? ")" : "; bf16 needs the device's autocast, LibTorch 2.4+)"));
      if (request.tf32 == Toggle::on) return Status(StatusCode::not_supported, "hostmem has no TF32");
      PrecisionPlan p;
      p.threads = request.threads;
      if (asked == Dtype::bf16) {
        p.dtype = Dtype::bf16;
        p.autocast = true;
        p.reasons.push_back("bf16 autocast: requested (LibTorch's CPU kernels in bf16; matmuls and convolutions "
                            "in bf16, losses and norms in fp32)");
      } else {
        p.reasons.push_back(std::string("fp32: ") + (request.precision ? "requested" : "the default") +
                            ": hostmem runs LibTorch's CPU kernels (native mm/addmm and the CPU fallback)" +
                            (kAutocast ? "; bf16 autocast on request" : ""));
      }
      p.reasons.push_back(request.threads > 0 ? "threads: as asked"
                                              : "threads: LibTorch's default (the CPU does the work)");
      return p;
    });
  }
  Status apply(const PrecisionPlan& plan) noexcept override {
    return guarded("hostmem apply", [&]() -> Status {
      if (plan.dtype == Dtype::fp16 || (plan.dtype == Dtype::bf16 && !kAutocast) || plan.tf32)
        return Status(StatusCode::not_supported, "hostmem runs fp32" + std::string(kAutocast ? " or bf16" : ""));
      if (plan.threads > 0) at::set_num_threads(plan.threads);
      const bool autocast = plan.autocast && plan.dtype == Dtype::bf16;
      if (autocast) compat::set_autocast_dtype(c10::DeviceType::PrivateUse1, at::kBFloat16);
      if (kAutocast) compat::set_autocast_enabled(c10::DeviceType::PrivateUse1, autocast);
      return Status();
    });
  }
  Result<std::vector<AppliedValue>> read_back() noexcept override {
    return guarded("hostmem read_back", [&]() -> Result<std::vector<AppliedValue>> {
      std::vector<AppliedValue> v{{"num_threads", std::to_string(at::get_num_threads()), PlanField::threads}};
      if (kAutocast) {
        v.push_back({"autocast_enabled", compat::autocast_enabled(c10::DeviceType::PrivateUse1) ? "true" : "false",
                     PlanField::autocast});
        v.push_back({"autocast_dtype", c10::toString(compat::autocast_dtype(c10::DeviceType::PrivateUse1)),
                     PlanField::autocast_dtype});
      }
      return v;
    });
  }
};

DeviceInfo device_info() {
  DeviceInfo d;
  d.id = std::string(HOSTMEM_NAME) + ":0";
  d.torch_device = "privateuseone:0";  // a device type LibTorch does not know: the host registers it
  d.name = "hostmem reference device (a memory arena of its own, LibTorch's CPU kernels)";
  d.vendor = "accelkit";
  d.kind = DeviceKind::npu;
  d.cores = std::max(1u, std::thread::hardware_concurrency());
  d.memory_bytes = arena_bytes();
  d.capabilities.add(Capability::fp32);
  if (kAutocast) d.capabilities.add(Capability::bf16);
  d.capabilities.add(Capability::reference_device);
  d.capabilities.set("native_kernels", "mm,addmm");
  d.properties = {{"memory", "an arena of its own (not the CPU allocator)"},
                  {"checking mode", checking_requested() ? "on (ACCELKIT_HOSTMEM_CHECK=1)" : "off"},
                  {"native kernels", "mm, addmm; the rest falls back to the CPU"}};
  return d;
}

class HostmemDevice final : public Device {
 public:
  HostmemDevice() : info_(device_info()) {}
  const DeviceInfo& info() const noexcept override { return info_; }
  Result<std::shared_ptr<Precision>> precision() noexcept override {
    return guarded("hostmem precision", [&]() -> Result<std::shared_ptr<Precision>> {
      return std::shared_ptr<Precision>(std::make_shared<HostmemPrecision>());
    });
  }
  Result<DeviceRuntime> runtime() noexcept override {
    return guarded("hostmem runtime", [&]() -> Result<DeviceRuntime> {
      Arena& a = arena();
      DeviceRuntime r;
      r.backend = HOSTMEM_NAME;
      r.device_count = [] { return 1; };
      r.allocate = [&a](std::size_t bytes, int) { return a.allocate(bytes); };
      r.deallocate = [&a](void* p, int) { a.deallocate(p); };
      r.copy = [&a](void* dst, const void* src, std::size_t bytes, CopyKind, int) {
        Arena::Access access(a);
        std::memcpy(dst, src, bytes);
      };
#ifndef HOSTMEM_WITHOUT_KERNELS
      r.kernels.push_back({"mm", [](torch::Library& lib) { lib.impl("mm", TORCH_FN(hostmem_mm)); }});
      r.kernels.push_back({"addmm", [](torch::Library& lib) { lib.impl("addmm", TORCH_FN(hostmem_addmm)); }});
#endif
#ifdef HOSTMEM_LACKS_COPY
      r.copy = nullptr;  // a broken table, for the host's refusal test
#endif
      return r;
    });
  }

 private:
  DeviceInfo info_;
};

class HostmemPlugin final : public Plugin {
 public:
  static constexpr const char* kName = HOSTMEM_NAME;
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription = "reference new device type: tensors in an arena of its own, CPU kernels";

  Result<ProbeReport> probe() noexcept override {
    return guarded("hostmem probe", [&]() -> Result<ProbeReport> {
      ProbeReport r;
      r.score = 1;
      r.devices.push_back(device_info());
      r.reasons.push_back("a reference device for backend authors: every operator but mm/addmm runs on the CPU "
                          "through the fallback; auto never picks it (--device " HOSTMEM_NAME " does)");
      return r;
    });
  }
  Result<std::shared_ptr<Device>> open(std::size_t index) noexcept override {
    return guarded("hostmem open", [&]() -> Result<std::shared_ptr<Device>> {
      if (index != 0) return Status(StatusCode::invalid_argument, "hostmem has one device (index 0)");
      return std::shared_ptr<Device>(std::make_shared<HostmemDevice>());
    });
  }
};

}  // namespace
}  // namespace accelkit::hostmem

ACCELKIT_PLUGIN(accelkit::hostmem::HostmemPlugin)
