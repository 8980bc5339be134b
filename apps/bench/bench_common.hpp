// What the bench's two runners (training steps: bench.cpp; inference: bench_infer.cpp) share:
// timing, statistics, the per-variant plan switch, facts read back from the device.
#pragma once

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/version.h>

#include "accelkit/bench.hpp"
#include "accelkit/device_sync.hpp"
#include "accelkit/runtime.hpp"
#include "bench_models.hpp"
#include "load_report.hpp"

namespace accelkit::bench_detail {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

using detail::synchronize;

inline BenchStats stats_of(std::vector<double> samples) {
  BenchStats s;
  s.samples_ms = samples;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  s.min_ms = samples.front();
  s.max_ms = samples.back();
  s.median_ms = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  return s;
}

inline double median_of(std::vector<double> v) { return stats_of(std::move(v)).median_ms; }

inline double load_average() {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

// After LibTorch's thread count changed, the new pool worker it starts busy-waits for a while
// (accelkit/machine_load.hpp): waits for it. Returns whether the count changed: the caller then
// runs one untimed step before it times one, because the step right after a change still runs
// slow (measured on a 2-core VM with LibTorch 1.13: the MNIST-sized CNN's 2-thread step took
// 16-18 ms in 11 of 16 steps after the 1-thread baseline, 5-8 ms otherwise; a core left idle
// while the other worked, or slept, wakes slowly).
inline bool settle_threads_after(int before) {
  if (at::get_num_threads() == before) return false;
  wait_for_idle_threads();
  return true;
}

inline bool set_threads(int n) {
  const int before = at::get_num_threads();
  if (n <= 0 || before == n) return false;
  at::set_num_threads(n);
  return settle_threads_after(before);
}

// Puts each variant's process-wide settings (threads, TF32, host BLAS kernels) in place before
// it runs, through the device's Precision::apply, and the accelkit plan back when run_bench
// returns or throws. Re-applies only when another variant ran in between.
class PlanSwitch {
 public:
  explicit PlanSwitch(Runtime& rt) : rt_(rt) {}
  ~PlanSwitch() {
    try {
      rt_.apply_precision(rt_.precision());
    } catch (const std::exception& e) {
      spdlog::warn("bench: restoring the accelkit precision plan failed: {}", e.what());
    }
  }
  PlanSwitch(const PlanSwitch&) = delete;
  PlanSwitch& operator=(const PlanSwitch&) = delete;

  // The next to() applies its plan whoever ran last (a variant's plan was changed in between).
  void forget() { current_.clear(); }

  // Whether LibTorch's thread count changed (settle_threads_after).
  bool to(const std::string& who, const PrecisionPlan& plan) {
    if (who == current_) return false;
    const int threads = at::get_num_threads();
    rt_.apply_precision(plan);
    current_ = who;
    return settle_threads_after(threads);
  }

 private:
  Runtime& rt_;
  std::string current_;
};

// A variant's plan, then its thread count: whether LibTorch's thread count changed on the way
// (the caller then runs one untimed step, settle_threads_after).
inline bool enter_variant(PlanSwitch& plans, const std::string& who, const PrecisionPlan& plan, int threads) {
  const bool by_plan = plans.to(who, plan);
  const bool by_threads = set_threads(threads);
  return by_plan || by_threads;
}

// A value as the device's Precision reads it back after apply: that of `field` or, with a key,
// of that key ("" when it reads none such).
inline std::string applied_value(const Runtime& rt, PlanField field, const std::string& key = {}) {
  auto precision = rt.device_handle()->precision();
  if (!precision.ok() || !precision.value()) return {};
  auto values = precision.value()->read_back();
  if (!values.ok()) return {};
  for (const auto& v : values.value())
    if (key.empty() ? v.field == field : v.key == key) return v.value;
  return {};
}

// How many calls the device's own operator kernels have run in this process (the sum of its
// read-back "kernel_calls.<op>" values; 0 for a device that reads back none).
inline std::uint64_t plugin_kernel_calls(const Runtime& rt) {
  auto precision = rt.device_handle()->precision();
  if (!precision.ok() || !precision.value()) return 0;
  auto values = precision.value()->read_back();
  if (!values.ok()) return 0;
  std::uint64_t total = 0;
  for (const auto& v : values.value())
    if (v.key.rfind("kernel_calls.", 0) == 0) total += std::strtoull(v.value.c_str(), nullptr, 10);
  return total;
}

// What runs a variant's matmuls (BenchVariant::matmuls): bf16 ones on a CPU with native bf16 go
// to oneDNN where LibTorch has it (its CPU bf16 GEMM path); the rest to the host BLAS the device
// reads back ("MKL", "OpenBLAS SkylakeX"). "" for a device that reads back no host BLAS.
inline std::string matmul_library(const Runtime& rt, at::ScalarType dtype) {
  const std::string blas = applied_value(rt, PlanField::other, "blas");
  if (blas.empty()) return {};
  if (dtype == at::kBFloat16 && at::hasMKLDNN() && rt.device_handle()->info().capabilities.has(Capability::bf16))
    return "oneDNN (bf16)";
  return blas;
}

inline int physical_cores(const Runtime& rt) {
  const DeviceInfo& info = rt.device_handle()->info();
  // A GPU's `cores` are its multiprocessors: the host threads that feed it stay LibTorch's default.
  if (info.kind != DeviceKind::cpu) return at::intraop_default_num_threads();
  const std::uint32_t cores = info.cores;
  if (cores > 0 && cores <= 65536) return static_cast<int>(cores);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}


// A plan with nothing but a thread count: how plain LibTorch runs - no TF32, the BLAS
// library's own kernels, no autocast.
inline PrecisionPlan plain_plan(int threads) {
  PrecisionPlan p;
  p.threads = threads;
  return p;
}

// o.model as a model file the bench can time in o's mode, or std::invalid_argument saying why
// not (missing, not a PyTorch archive, a .pt2 package on LibTorch < 2.6 or in training mode).
void check_model_file(const BenchOptions& o);

// net.forward(x), or std::invalid_argument naming the file, the --input shapes and LibTorch's
// reason when the model refuses them.
at::Tensor forward_or_explain(const Net& net, const at::Tensor& x, const BenchOptions& o);

// `accelkit bench --model FILE` in inference mode (bench_infer.cpp).
BenchResult run_infer_bench(Runtime& rt, const BenchOptions& o, const BenchProgressFn& progress);

// BenchOptions::trace: o.trace_steps calls of `step` (the accelkit variant's, settings in place)
// under LibTorch's profiler, the device synchronised around them, into r.trace.
inline void trace_steps(BenchResult& r, const BenchOptions& o, c10::Device device, const std::function<void()>& step) {
  TraceOptions options;
  options.path = o.trace;
  Trace trace;
  synchronize(device);
  trace.start(options);
  for (int i = 0; i < o.trace_steps; ++i) {
    profile_scope scope("accelkit step");
    step();
  }
  synchronize(device);
  r.trace = trace.stop();
  r.trace_steps = std::to_string(o.trace_steps) + " accelkit steps after the timed ones";
}

// What a result says before anything runs: the model as `label`, the device, LibTorch, the run's
// length; then the machine's load and the other work on it (machine_before may wait for quiet).
inline void begin_result(BenchResult& r, const Runtime& rt, const BenchOptions& o, const std::string& label,
                         const BenchProgressFn& progress) {
  r.model = label;
  r.device = rt.device_handle()->info().id;
  r.torch_device = rt.device().str();
  r.torch_version = TORCH_VERSION;
  r.steps = o.steps;
  r.warmup = o.warmup;
  r.load_before = load_average();
  machine_before(r.machine, o, label, progress);
}

inline void report(const BenchProgressFn& progress, const std::string& model, const char* phase, int done, int total,
                   std::string detail = {}) {
  if (progress) progress(BenchProgress{model, phase, done, total, std::move(detail)});
}

}  // namespace accelkit::bench_detail
