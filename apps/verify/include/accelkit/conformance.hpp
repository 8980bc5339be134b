// accelkit::conformance - does a device do what its plugin claims? Behind `accelkit verify`,
// and the one call an out-of-tree plugin's own test suite makes:
//
//   auto reports = accelkit::conformance::check_plugin_dir("/path/to/build");  // every device
//   for (const auto& r : reports) CHECK(r.failed() == 0);
//
// Each check runs only for what the device's capabilities claim (bf16, fp16, tf32,
// fused_adamw, fused_sgd, master_weights, graph_capture, sdpa_*, thermal, power, utilisation,
// memory_stats, route.<op>), on fresh random inputs, against a reference LibTorch computes on
// the CPU in fp32/fp64 with its own ops; each result states the measured difference and the
// tolerance with why. A claim that cannot be checked here is skipped with the reason; nothing
// is passed unchecked.
//
// The checks change process-wide LibTorch state (threads, TF32, autocast, SDPA switches)
// while they run and put the device's plan for `CheckOptions::request` back at the end.
// Run them on one thread, with nothing else running on the device.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "accelkit/context.hpp"
#include "accelkit/routing.hpp"
#include "accelkit/sdk/device.hpp"
#include "accelkit/sdk/precision.hpp"

namespace accelkit::conformance {

enum class Outcome { pass, fail, skipped };
const char* to_string(Outcome o) noexcept;

struct CheckResult {
  std::string capability;  // what is checked: "plan", "bf16", "fused_adamw", "thermal", "training", ...
  std::string name;        // "matmul under the plan's autocast", "50 steps vs torch::optim::AdamW"
  Outcome outcome = Outcome::pass;
  // fail: what differed, by how much; skipped: why; pass: the figure and the tolerance.
  std::string detail;
  std::optional<double> error;      // the measured difference, when there is one
  std::optional<double> tolerance;  // what it is held to
  double seconds = 0;
};

struct CheckOptions {
  bool quick = false;       // smaller problems and fewer steps (`verify --quick`)
  std::uint64_t seed = 0;   // 0 = fresh inputs every run (seeded from the clock; the seed is reported)
  bool training = true;     // the short end-to-end training run
  // The precision request the device runs with outside the checks (the settings'); its plan is
  // put back at the end, and the plan check applies it.
  PrecisionRequest request;
  // Where each operation class runs (Runtime::routes()); empty = the plugin's own route.<op>
  // keys (resolve_routes with no overrides).
  std::vector<Route> routes;
  std::function<void(const CheckResult&)> on_result;  // each result as it is known
};

struct DeviceReport {
  DeviceInfo device;
  std::uint64_t seed = 0;
  std::vector<CheckResult> results;
  double seconds = 0;
  int count(Outcome o) const;
  int failed() const { return count(Outcome::fail); }
};

// Every check `device` claims. Its tensors must be creatable (a device LibTorch does not know
// needs Runtime::start to have registered it). Never throws for what the device does: an
// exception from a check is that check's failure.
DeviceReport check_device(Device& device, const CheckOptions& options = {});

// The ids of every device of `ctx`'s decision that LibTorch here can drive and its plugin
// offers (auto's choice or not: reference devices, others not requested), best first - but
// devices LibTorch does not know (PrivateUse1) before all others: Runtime::start registers
// one, which must happen before the process's first backward.
std::vector<std::string> usable_devices(const Context& ctx);

// Starts a Runtime on device `id` ("" = the negotiated one) with `base`'s settings and
// plugins, and checks it with the settings' precision request and the runtime's routes.
// Throws what Runtime::start throws (DeviceUnavailableError, SettingsError).
DeviceReport check_runtime_device(const ContextOptions& base, const std::string& id, const CheckOptions& options = {});

// Loads the plugins in `dir` alone (no other search path, a fresh scan), and checks every
// usable device they report - what a backend author's test suite calls on its build directory.
// Throws std::runtime_error when no plugin there loads or none reports a usable device.
std::vector<DeviceReport> check_plugin_dir(const std::string& dir, const CheckOptions& options = {});

// What a read-back value should be under `plan` (`report --apply` and the plan check);
// nullopt when the plan does not fix it.
std::optional<std::string> intended_value(const AppliedValue& read, const PrecisionPlan& plan);
// Whether two spellings of a value are the same ("torch.bfloat16" and "bf16", "1" and "true").
bool same_value(const std::string& intended, const std::string& read);

}  // namespace accelkit::conformance
