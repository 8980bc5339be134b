// The built libaccelkit-cuda.so, opened with dlopen the way the host does, on this machine.
// ctest runs it twice: with the real driver name (here: no libcuda -> "no NVIDIA driver"),
// and with ACCELKIT_CUDA_DRIVER_LIB pointing at the fixture libcuda (two fake GPUs: listed,
// and unusable when LibTorch here has no CUDA).
#include <doctest/doctest.h>

#include <ATen/detail/CUDAHooksInterface.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

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
