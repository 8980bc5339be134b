// A Runtime on the built CPU plugin alone, for the suites that take a user's model: no
// environment, no default plugin places, device cpu, plus the caller's command-line settings.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "accelkit/runtime.hpp"
#include "accelkit/sdk/device.hpp"
#include "accelkit/sdk/torch_compat.hpp"

namespace accelkit::test {

inline std::unique_ptr<Runtime> start_cpu_runtime(std::vector<std::pair<std::string, std::string>> cli = {}) {
  ContextOptions o;
  o.settings.env = std::map<std::string, std::string>{};
  cli.insert(cli.begin(), {"device", "cpu"});
  o.settings.cli = std::move(cli);
  o.loader.cli_paths = {ACCELKIT_TEST_PLUGIN_DIR};
  o.loader.read_environment = false;
  o.loader.include_default_dirs = false;
  return Runtime::start(o);
}

// The calling thread in fp32 for the holder's life: the CPU plan turns the thread's bf16 autocast
// on where bf16 arithmetic is fast (AMX, Zen 4), and a suite that checks fp32 kernels against
// LibTorch's holds it off (restored at the end; a Runtime leaves the thread as its plan set it).
struct Fp32Thread {
  compat::AutocastGuard guard{c10::DeviceType::CPU, false, compat::autocast_dtype(c10::DeviceType::CPU)};
};

// The CPU plugin's own count of the calls its operator kernel for `op` ran in this process (its
// read-back "kernel_calls.<op>"); nullopt where it reads back none.
inline std::optional<std::uint64_t> kernel_calls(const Runtime& rt, const std::string& op) {
  auto precision = rt.device_handle()->precision();
  if (!precision.ok()) return std::nullopt;
  auto values = precision.value()->read_back();
  if (!values.ok()) return std::nullopt;
  for (const auto& v : values.value())
    if (v.key == "kernel_calls." + op) return std::stoull(v.value);
  return std::nullopt;
}

// kernel_calls, where a test cannot go on without it: std::runtime_error (the test case fails
// with its message) where the plugin reads back none.
inline std::uint64_t required_kernel_calls(const Runtime& rt, const std::string& op) {
  const auto calls = kernel_calls(rt, op);
  if (!calls) throw std::runtime_error("the CPU plugin reads back no kernel_calls." + op);
  return *calls;
}

// Whether the runtime's plan lists the plugin's kernel for `op`.
inline bool plan_lists_kernel(const Runtime& rt, const std::string& op) {
  for (const auto& k : rt.precision().kernels)
    if (k == op) return true;
  return false;
}

}  // namespace accelkit::test
