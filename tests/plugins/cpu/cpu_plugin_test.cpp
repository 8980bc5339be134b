// The built libaccelkit-cpu.so, opened with dlopen the way the host does (handshake, then the
// Boost.DLL factory alias), on this machine: probe, open, precision apply/read_back, monitor.
#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include "torch_doctest.hpp"

#include <dlfcn.h>

#include <cstring>
#include <memory>
#include <string>

#include <accelkit/sdk/monitor.hpp>
#include <accelkit/sdk/optimizer.hpp>
#include <accelkit/sdk/plugin.hpp>
#include <accelkit/sdk/precision.hpp>

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace cpu_plugin_suite {

using namespace accelkit;

namespace {

struct Loaded {
  void* handle = nullptr;  // never dlclosed: plugins stay loaded for the process
  const AccelkitPluginInfo* info = nullptr;
  std::unique_ptr<Plugin> plugin;
};

Loaded& loaded() {
  static Loaded l = [] {
    Loaded out;
    out.handle = ::dlopen(ACCELKIT_CPU_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!out.handle) FAIL("dlopen: " << ::dlerror());
    void* info_sym = ::dlsym(out.handle, ACCELKIT_PLUGIN_INFO_SYMBOL);
    REQUIRE(info_sym != nullptr);
    out.info = reinterpret_cast<AccelkitPluginInfoFn>(info_sym)();
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

std::string value_of(const std::vector<AppliedValue>& values, const std::string& key) {
  for (const auto& v : values)
    if (v.key == key) return v.value;
  FAIL("no applied value " << key);
  return {};
}

}  // namespace

TEST_CASE("handshake: name, ABI, LibTorch version, C++ ABI tag") {
  const AccelkitPluginInfo* info = loaded().info;
  REQUIRE(info != nullptr);
  CHECK(info->struct_size == sizeof(AccelkitPluginInfo));
  CHECK(info->abi_major == ACCELKIT_ABI_MAJOR);
  CHECK(std::string(info->name) == "cpu");
  CHECK(std::string(info->torch_version) == ACCELKIT_TORCH_VERSION_STRING);
  CHECK(std::string(info->cxx_abi) == ACCELKIT_CXX_ABI_TAG);
  REQUIRE(info->description != nullptr);
}

TEST_CASE("only the two entry points are exported") {
  // The static library's functions are hidden: looking one up must fail.
  CHECK(::dlsym(loaded().handle, "_ZN8accelkit3cpu9probe_cpuEv") == nullptr);
}

TEST_CASE("probe: one usable cpu device") {
  auto report = loaded().plugin->probe();
  REQUIRE(report.ok());
  CHECK(report->score > 0);
  REQUIRE(report->devices.size() == 1);
  const DeviceInfo& d = report->devices[0];
  CHECK(d.id == "cpu:0");
  CHECK(d.torch_device == "cpu");
  CHECK(d.kind == DeviceKind::cpu);
  CHECK(d.capabilities.has(Capability::fp32));
  CHECK(d.memory_bytes > 0);
  CHECK_FALSE(report->reasons.empty());
  // LibTorch is loaded with the plugin, so its BLAS is visible in the memory map.
  CHECK(d.capabilities.extra.count("blas") == 1);
  MESSAGE("blas: " << (d.capabilities.extra.count("blas") ? d.capabilities.extra.at("blas") : "?")
                   << ", isa: " << d.capabilities.extra.at("isa"));
}

TEST_CASE("open: index 0 only; no optimizer yet") {
  auto& plugin = *loaded().plugin;
  auto bad = plugin.open(1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::invalid_argument);
  auto dev = plugin.open(0);
  REQUIRE(dev.ok());
  REQUIRE(dev.value() != nullptr);
  CHECK(dev.value()->info().id == "cpu:0");
  auto opt = dev.value()->optimizer();
  REQUIRE(opt.ok());
  CHECK(opt.value()->implementation().find("fused AdamW") != std::string::npos);
  // Through the plugin boundary: one step moves a parameter against its gradient.
  at::Tensor p = at::ones({5});
  p.mutable_grad() = at::full({5}, 0.5);
  AdamWConfig config;
  config.lr = 0.1;
  config.weight_decay = 0;
  auto adamw = opt.value()->create_adamw({p}, config);
  REQUIRE(adamw.ok());
  adamw.value()->step();
  CHECK(p[0].item<float>() == doctest::Approx(0.9).epsilon(1e-5));  // first Adam step moves by lr
}

TEST_CASE("precision: plan, apply, read back from LibTorch") {
  auto dev = loaded().plugin->open(0);
  REQUIRE(dev.ok());
  auto precision = dev.value()->precision();
  REQUIRE(precision.ok());
  Precision& p = *precision.value();

  PrecisionRequest fp16;
  fp16.precision = Dtype::fp16;
  CHECK(p.plan(fp16).status().code() == StatusCode::not_supported);

  PrecisionRequest bf16;
  bf16.precision = Dtype::bf16;
  bf16.threads = 1;
  auto plan = p.plan(bf16);
  REQUIRE(plan.ok());
  REQUIRE(p.apply(plan.value()).is_ok());
  auto back = p.read_back();
  REQUIRE(back.ok());
  CHECK(value_of(back.value(), "num_threads") == "1");
  CHECK(value_of(back.value(), "autocast_cpu_enabled") == "true");
  CHECK(value_of(back.value(), "autocast_cpu_dtype") == "BFloat16");
  CHECK_FALSE(value_of(back.value(), "num_interop_threads").empty());

  auto fp32 = p.plan(PrecisionRequest{Dtype::fp32, Toggle::off, 0});
  REQUIRE(fp32.ok());
  CHECK(fp32->threads >= 1);  // physical cores
  REQUIRE(p.apply(fp32.value()).is_ok());
  back = p.read_back();
  REQUIRE(back.ok());
  CHECK(value_of(back.value(), "autocast_cpu_enabled") == "false");
  CHECK(value_of(back.value(), "num_threads") == std::to_string(fp32->threads));

  PrecisionPlan fp16_plan;
  fp16_plan.dtype = Dtype::fp16;
  CHECK(p.apply(fp16_plan).code() == StatusCode::not_supported);
}

TEST_CASE("monitor: samples this machine") {
  auto dev = loaded().plugin->open(0);
  REQUIRE(dev.ok());
  auto monitor = dev.value()->monitor();
  REQUIRE(monitor.ok());
  REQUIRE(monitor.value()->sample().ok());
  auto s = monitor.value()->sample();
  REQUIRE(s.ok());
  for (const Reading& r : s.value()) {
    INFO(r.key);
    CHECK((r.value.has_value() || !r.note.empty()));
  }
}

}  // namespace cpu_plugin_suite
