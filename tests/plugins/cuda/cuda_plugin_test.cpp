// The built libaccelkit-cuda.so, opened with dlopen the way the host does, on this machine.
// ctest runs it twice: with the real driver name (here: no libcuda -> "no NVIDIA driver"),
// and with ACCELKIT_CUDA_DRIVER_LIB pointing at the fixture libcuda (two fake GPUs: listed,
// and unusable when LibTorch here has no CUDA).
#include "torch_doctest.hpp"

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <string>

#include <accelkit/sdk/monitor.hpp>
#include <accelkit/sdk/plugin.hpp>

using namespace accelkit;

namespace {

struct Loaded {
  void* handle = nullptr;  // never dlclosed
  const AccelkitPluginInfo* info = nullptr;
  std::unique_ptr<Plugin> plugin;
};

Loaded& loaded() {
  static Loaded l = [] {
    Loaded out;
    out.handle = ::dlopen(ACCELKIT_CUDA_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!out.handle) FAIL("dlopen: " << ::dlerror());
    out.info = reinterpret_cast<AccelkitPluginInfoFn>(::dlsym(out.handle, ACCELKIT_PLUGIN_INFO_SYMBOL))();
    auto alias = static_cast<const void* const*>(::dlsym(out.handle, ACCELKIT_PLUGIN_FACTORY_ALIAS));
    REQUIRE(alias != nullptr);
    auto factory = reinterpret_cast<PluginFactory*>(const_cast<void*>(*alias));
    Status error;
    out.plugin.reset(factory(&error));
    if (!out.plugin) FAIL("factory: " << error.message());
    return out;
  }();
  return l;
}

bool fake_driver() {
  const char* lib = std::getenv("ACCELKIT_CUDA_DRIVER_LIB");
  return lib && std::string(lib).find("fake") != std::string::npos;
}

bool real_driver_present() {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!h) h = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  return h != nullptr;  // not closed: the plugin may use it
}

bool torch_has_cuda() { return at::detail::getCUDAHooks().hasCUDART(); }

bool any_starts(const std::vector<std::string>& lines, const std::string& prefix) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
}

}  // namespace

TEST_CASE("handshake: name cuda, this host's ABI and LibTorch") {
  const AccelkitPluginInfo* info = loaded().info;
  REQUIRE(info != nullptr);
  CHECK(std::string(info->name) == "cuda");
  CHECK(info->abi_major == ACCELKIT_ABI_MAJOR);
  CHECK(std::string(info->torch_version) == ACCELKIT_TORCH_VERSION_STRING);
  CHECK(std::string(info->cxx_abi) == ACCELKIT_CXX_ABI_TAG);
}

TEST_CASE("only the two entry points are exported; no CUDA library is linked") {
  CHECK(::dlsym(loaded().handle, "_ZN8accelkit4cuda10probe_cudaEv") == nullptr);
  // Loading the plugin must not have pulled libcuda in (it is dlopened by probe only).
  if (!real_driver_present()) CHECK(::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == nullptr);
}

TEST_CASE("probe reports instead of failing") {
  auto report = loaded().plugin->probe();
  REQUIRE(report.ok());
  MESSAGE("score " << report->score << "; " << (report->reasons.empty() ? "" : report->reasons.front()));
  if (fake_driver()) {
    REQUIRE(report->devices.size() == 2);
    CHECK(report->devices[0].id == "cuda:0");
    CHECK(report->devices[0].name == "NVIDIA H100 80GB HBM3");
    CHECK(report->devices[1].id == "cuda:1");
    CHECK(report->devices[0].capabilities.has(Capability::bf16));
    CHECK(report->devices[1].capabilities.has(Capability::fp16));
    if (!torch_has_cuda()) {
      CHECK(report->score == 0);
      CHECK(any_starts(report->reasons, "LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." +
                                            std::to_string(TORCH_VERSION_MINOR) +
                                            " in this process was built without CUDA"));
      CHECK(report->devices[0].torch_device.empty());
    }
  } else if (!real_driver_present()) {
    CHECK(report->score == 0);
    CHECK(report->devices.empty());
    CHECK(any_starts(report->reasons, "no NVIDIA driver: "));
  } else {
    for (std::size_t i = 0; i < report->devices.size(); ++i)
      CHECK(report->devices[i].id == "cuda:" + std::to_string(i));
  }
}

TEST_CASE("open: out of range is invalid; an unusable device says why") {
  auto& plugin = *loaded().plugin;
  auto report = plugin.probe();
  REQUIRE(report.ok());
  auto bad = plugin.open(report->devices.size());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::invalid_argument);
  if (report->score == 0 && !report->devices.empty()) {
    auto dev = plugin.open(0);
    REQUIRE_FALSE(dev.ok());
    CHECK(dev.status().code() == StatusCode::unavailable);
    CHECK(dev.status().message().find("cuda:0 cannot be used") == 0);
  }
}

// On a GPU with a CUDA LibTorch: the Device's memory figures follow a 256 MiB tensor through
// the caching allocator (in use, peak, reserved) and NVML (free), reset_peak_memory() starts a
// new peak, empty_cache() hands the cached block back; the monitor reads the slowdown
// temperature and the throttle flag.
TEST_CASE("a real GPU: memory() follows a tensor; reset_peak_memory and empty_cache act; limits read") {
  if (fake_driver() || !real_driver_present() || !torch_has_cuda()) {
    MESSAGE("skipped: needs the NVIDIA driver and a LibTorch with CUDA");
    return;
  }
  auto& plugin = *loaded().plugin;
  auto report = plugin.probe();
  REQUIRE(report.ok());
  if (report->score == 0) {
    MESSAGE("skipped: no usable CUDA device here");
    return;
  }
  auto opened = plugin.open(0);
  REQUIRE(opened.ok());
  Device& d = *opened.value();
  const std::uint64_t bytes = std::uint64_t{256} << 20;
  const auto mib = [](std::uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  REQUIRE(d.empty_cache().ok());
  // Before this process's first CUDA tensor: LibTorch's allocator is not initialised yet.
  auto before = d.memory();
  INFO((before.ok() ? std::string() : before.status().message()));
  REQUIRE(before.ok());
  REQUIRE(before->in_use);
  REQUIRE(before->peak);
  REQUIRE(before->reserved);
  REQUIRE(before->total);
  REQUIRE(before->available);
  MESSAGE("before: in use " << mib(*before->in_use) << " MiB, reserved " << mib(*before->reserved) << " MiB, free "
                            << mib(*before->available) << " of " << mib(*before->total) << " MiB (" << before->source << ")");
  const Status reset_first = d.reset_peak_memory();
  INFO(reset_first.message());
  REQUIRE(reset_first.ok());
  std::optional<Result<MemoryStats>> during;
  {
    at::Tensor t = at::ones({static_cast<std::int64_t>(bytes / 4)}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0));
    CHECK(t.sum().item<double>() == doctest::Approx(static_cast<double>(bytes / 4)));
    during = d.memory();
  }
  REQUIRE(during->ok());
  const MemoryStats& m = during->value();
  MESSAGE("with the tensor: in use " << mib(*m.in_use) << " MiB, peak " << mib(*m.peak) << " MiB, reserved "
                                     << mib(*m.reserved) << " MiB, free " << mib(*m.available) << " MiB");
  CHECK(*m.in_use >= *before->in_use + bytes);
  CHECK(*m.peak >= *m.in_use);
  CHECK(*m.reserved >= *m.in_use);
  CHECK(*m.total == *before->total);
  // The allocator had nothing cached: the tensor's block came from cudaMalloc, which NVML sees.
  CHECK(*before->available >= *m.available + bytes * 9 / 10);

  auto freed = d.memory();
  REQUIRE(freed.ok());
  CHECK(*freed->in_use + bytes <= *m.in_use);
  CHECK(*freed->peak >= *before->in_use + bytes);  // the peak stays until it is reset
  CHECK(*freed->reserved >= bytes);                // the block stays cached
  REQUIRE(d.empty_cache().ok());
  auto emptied = d.memory();
  REQUIRE(emptied.ok());
  MESSAGE("after empty_cache: reserved " << mib(*emptied->reserved) << " MiB, free " << mib(*emptied->available) << " MiB");
  CHECK(*emptied->reserved + bytes <= *freed->reserved);
  CHECK(*emptied->available >= *freed->available + bytes * 9 / 10);
  REQUIRE(d.reset_peak_memory().ok());
  auto reset = d.memory();
  REQUIRE(reset.ok());
  CHECK(*reset->peak + bytes <= *freed->peak);

  auto monitor = d.monitor();
  REQUIRE(monitor.ok());
  auto sample = monitor.value()->sample();
  REQUIRE(sample.ok());
  std::optional<double> temperature, limit, throttled;
  for (const Reading& r : sample.value()) {
    MESSAGE(r.key << " = " << (r.value ? std::to_string(*r.value) : "n/a") << " " << r.unit << " [" << r.source << "] "
                  << r.note);
    if (r.key == reading::temperature_c) temperature = r.value;
    if (r.key == reading::temperature_limit_c) limit = r.value;
    if (r.key == reading::throttled) throttled = r.value;
  }
  REQUIRE(temperature);
  REQUIRE(limit);  // every data-centre NVIDIA GPU reports its slowdown temperature
  CHECK(*limit >= 60);
  CHECK(*limit <= 120);
  CHECK(*limit > *temperature);
  REQUIRE(throttled);
  CHECK((*throttled == 0 || *throttled == 1));
}
