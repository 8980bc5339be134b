#include "accelkit/new_device.hpp"
#include "accelkit/bench.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>
#include <torch/utils.h>

#include <spdlog/spdlog.h>

#include "accelkit/sdk/device.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/step_capture.hpp"
#include "accelkit/sdk/support/aten_fused_adamw.hpp"
#include "accelkit/sdk/torch_compat_memory.hpp"
#include "bench_common.hpp"
#include "bench_models.hpp"
#include "accelkit/device_sync.hpp"
#include "accelkit/memory_scope.hpp"
#include "accelkit/prefetch.hpp"

namespace accelkit {

using bench_detail::ModelSpec;
using bench_detail::Net;
using namespace bench_detail;  // the helpers bench_common.hpp shares with bench_infer.cpp

std::string bench_mode(const BenchOptions& o) {
  if (!o.mode.empty()) return o.mode;
  return bench_detail::is_builtin_model(o.model) ? "train" : "infer";
}

void validate(const BenchOptions& o) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("bench: " + what); };
  const bool file = !bench_detail::is_builtin_model(o.model);
  if (file && o.model.find('/') == std::string::npos && o.model.find('.') == std::string::npos)
    bad("unknown model '" + o.model.substr(0, 60) +
        "' (expected mlp, transformer, cnn, optimizer, a TorchScript file or a .pt2 package)");
  if (file && o.inputs.empty())
    bad("--model " + o.model.substr(0, 200) + " needs --input for each argument of its forward (e.g. --input 32x3x224x224)");
  if (!file && !o.inputs.empty()) bad("--input is for a model file; the " + o.model + " model makes its own inputs");
  if (!o.mode.empty() && o.mode != "infer" && o.mode != "train")
    bad("--mode must be infer or train, got '" + o.mode.substr(0, 40) + "'");
  if (!file && o.mode == "infer") bad("--mode infer is for a model file; the built-in models train");
  if (file && (o.batch > 0 || o.width > 0)) bad("--batch and --width mean nothing to a model file: --input gives the shapes");
  for (const auto& in : o.inputs) bench_detail::parse_input(in);
  if (o.model == "cnn" && o.width > 0) bad("--width means nothing to the cnn model (MNIST's 28 x 28 images)");
  if (o.steps < 1) bad("--steps must be at least 1, got " + std::to_string(o.steps));
  if (o.warmup < 0) bad("--warmup must be 0 or more, got " + std::to_string(o.warmup));
  if (o.batch < 0) bad("--batch must be positive (0 = the model's default), got " + std::to_string(o.batch));
  if (o.width < 0) bad("--width must be positive (0 = the model's default), got " + std::to_string(o.width));
  if (o.vs_eager && (o.model == "optimizer" || file))
    bad("--vs-eager compares a captured training step with the eager one: the built-in mlp, transformer and cnn only");
  if (o.model == "optimizer" && (o.batch > 0 || o.batch_auto))
    bad("--batch means nothing to the optimizer model (it has no data)");
  if (o.batch_auto && file) bad("--batch auto sizes the built-in models; a model file's --input gives its batch");
  if (o.batch_auto && o.batch > 0) bad("--batch is either a number or auto");
  if (o.batch_max < 0) bad("--batch auto:MAX needs MAX >= 1");
  if (o.check_steps < 1) bad("the accuracy check needs at least 1 step, got " + std::to_string(o.check_steps));
  if (!(o.tolerance >= 0) || !std::isfinite(o.tolerance))
    bad("tolerance must be a finite number >= 0 (0 = the model's default)");
  if (o.baseline_threads < 0) bad("baseline threads must be >= 0, got " + std::to_string(o.baseline_threads));
  if (o.floor_copy_bytes < 0 || o.floor_matmul_n < 0) bad("floor sizes must be >= 0 (0 = default)");
  if (!(o.wait_quiet_s >= 0 && o.wait_quiet_s <= 3600)) bad("--wait-quiet must be between 0 and 3600 seconds");
  if (!(o.data_ms >= 0 && o.data_ms <= 10000)) bad("--data-ms must be between 0 and 10000 ms per batch");
  if (o.data_ms > 0 && (file || o.model == "optimizer"))
    bad("--data-ms feeds the built-in mlp, transformer and cnn models (the optimizer model has no data)");
  if (!o.quantize.empty() && o.quantize != "int8" && o.quantize != "int8-static")
    bad("--quantize must be int8 or int8-static, got '" + o.quantize.substr(0, 40) + "'");
  if (!o.quantize.empty() && (!file || bench_mode(o) != "infer"))
    bad("--quantize is for a model file in inference mode (--model FILE --mode infer)");
  if (o.trace_steps < 1) bad("trace steps must be at least 1, got " + std::to_string(o.trace_steps));
  if (!o.trace.empty()) check_trace_path(o.trace);
}

namespace {

const char* dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return "bf16";
    case at::kHalf: return "fp16";
    default: return "fp32";
  }
}

torch::optim::AdamWOptions adamw_options(const AdamWConfig& c) {
  return torch::optim::AdamWOptions(c.lr)
      .betas(std::make_tuple(c.beta1, c.beta2))
      .eps(c.eps)
      .weight_decay(c.weight_decay)
      .amsgrad(c.amsgrad);
}

// One way of running the step: settings, its own copy of the model and optimizer.
struct Runner {
  BenchVariant info;
  c10::Device device{c10::kCPU};
  bool autocast = false;
  at::ScalarType dtype = at::kFloat;
  Net net;                          // empty for the optimizer model
  std::vector<at::Tensor> params;
  std::shared_ptr<torch::optim::Optimizer> opt;
  std::optional<LossScaler> scaler;  // accelkit only
  std::function<void(at::Tensor&)> hook;
  PrecisionPlan plan;                // applied (through `plans`) before each of this variant's steps
  PlanSwitch* plans = nullptr;
  bool grads_to_none = false;        // accelkit: accelkit::zero_grad (none); others: zeroed buffers
  bool channels_last = false;        // 4-D weights and the input in channels-last (NHWC) layout
  // accelkit with compile != off: the step through Runtime::capture_step, on the static x and
  // target; it writes its loss into graph_loss. Made once the runners no longer move.
  std::unique_ptr<StepCapture> graph;
  at::Tensor graph_loss;
  double* graph_phases = nullptr;  // phases for the step function while it runs eagerly
  std::string step_mode = "eager: plain LibTorch";
  // Set while the step tuner observes this runner's steps: their autocast comes from it.
  const Runtime* step_tuned = nullptr;

  void capture(Runtime& rt, const at::Tensor& x, const at::Tensor& target) {
    graph_loss = at::zeros({}, x.options().dtype(at::kFloat));
    // warmup 1: the accuracy check's steps then cover the capture and a replay.
    graph = rt.capture_step(*opt, [this, &x, &target] { graph_loss.copy_(eager_step(x, target, graph_phases)); }, 1);
  }

  // Forward under this variant's autocast; the loss in fp32 outside it (LibTorch 1.13's CPU
  // autocast runs mse_loss in bf16 and its backward then fails on the mixed dtypes).
  at::Tensor loss(const at::Tensor& x, const at::Tensor& target) {
    at::Tensor y;
    {
      const at::Tensor in = channels_last ? x.contiguous(at::MemoryFormat::ChannelsLast) : x;
      if (step_tuned) {
        auto ac = step_tuned->autocast();  // the step tuner's candidate for this step
        y = net.forward(in);
      } else {
        // Off: keep the current dtype (1.13's CPU autocast refuses to be set to float).
        compat::AutocastGuard guard(device.type(), autocast, autocast ? dtype : compat::autocast_dtype(device.type()));
        y = net.forward(in);
      }
    }
    if (hook) hook(y);
    return at::mse_loss(y.to(at::kFloat), target);
  }

  // One step; returns the (detached) loss, undefined for the optimizer model. With `phases`,
  // adds the time of zero_grad + forward + loss, backward, and the optimizer step (ms),
  // synchronising between them - except for a captured step, which has no phases (and no
  // synchronisation may happen while it is being captured).
  // Whether LibTorch's thread count changed on the way in (bench_common.hpp: the next step is
  // then run untimed).
  bool enter() { return enter_variant(*plans, info.name, plan, info.threads); }

  at::Tensor step(const at::Tensor& x, const at::Tensor& target, double* phases = nullptr) {
    if (!graph) return eager_step(x, target, phases);
    enter();
    graph_phases = graph->eager() ? phases : nullptr;
    graph->run();
    graph_phases = nullptr;
    return graph_loss;  // overwritten by the next step
  }

  at::Tensor eager_step(const at::Tensor& x, const at::Tensor& target, double* phases) {
    enter();
    auto t0 = Clock::now();
    auto lap = [&](int i) {
      if (!phases) return;
      synchronize(device);
      phases[i] += ms_since(t0);
      t0 = Clock::now();
    };
    if (!net.forward) {
      opt->step();
      if (hook) {
        at::NoGradGuard no_grad;
        hook(params.front());
      }
      lap(2);
      return {};
    }
    if (grads_to_none) zero_grad(*opt);
    else opt->zero_grad();
    at::Tensor l = loss(x, target);
    lap(0);
    if (scaler) {
      scaler->scale(l).backward();
      lap(1);
      scaler->step(*opt);
    } else {
      l.backward();
      lap(1);
      opt->step();
    }
    lap(2);
    return l.detach();
  }

  // A synchronised step: total ms, and the phases into `phases[3]`.
  double timed_step(const at::Tensor& x, const at::Tensor& target, double* phases) {
    if (enter()) step(x, target);  // untimed: the first step at a new thread count runs slow
    synchronize(device);
    const auto t0 = Clock::now();
    step(x, target, phases);
    synchronize(device);
    return ms_since(t0);
  }

  // After the check steps: the final loss (forward only) or the parameters' norm.
  double final_value(const at::Tensor& x, const at::Tensor& target) {
    enter();
    at::NoGradGuard no_grad;
    if (net.forward) return loss(x, target).item<double>();
    double sq = 0;
    for (const auto& p : params) sq += p.to(at::kDouble).pow(2).sum().item<double>();
    return std::sqrt(sq);
  }
};

double rel_diff(double a, double ref) {
  if (!std::isfinite(a) || !std::isfinite(ref)) return std::numeric_limits<double>::infinity();
  const double den = std::abs(ref);
  return den > 0 ? std::abs(a - ref) / den : std::abs(a - ref);
}

// ||a - b|| / ||b|| over all parameters, in double.
double params_rel_diff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    at::Tensor bd = b[i].detach().to(at::kDouble);
    num += (a[i].detach().to(at::kDouble) - bd).pow(2).sum().item<double>();
    den += bd.pow(2).sum().item<double>();
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

struct Bandwidth {
  double copy_gbps = 0;     // dst.copy_(src): bytes read + written
  double inplace_gbps = 0;  // x.mul_(1): read and write the same lines (AdamW's own pattern)
};

// The fastest of `runs` after a warm-up, the two patterns interleaved: a floor is the best the
// machine reached (a median on a shared machine would put it above steps that ran quietly).
Bandwidth measure_bandwidth(c10::Device device, std::int64_t bytes, int runs) {
  const std::int64_t n = bytes / 4;
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor src = at::empty({n}, opts).fill_(1);  // touch every page before timing
  at::Tensor dst = at::empty({n}, opts).fill_(0);
  std::vector<double> copy_ms, inplace_ms;
  auto time = [&](auto&& body) {
    synchronize(device);
    const auto t0 = Clock::now();
    body();
    synchronize(device);
    return ms_since(t0);
  };
  for (int i = 0; i <= runs; ++i) {
    const double c = time([&] { dst.copy_(src); });
    const double p = time([&] { dst.mul_(1.0); });
    if (i) {  // the first of each is warm-up
      copy_ms.push_back(c);
      inplace_ms.push_back(p);
    }
  }
  const double moved = 2.0 * static_cast<double>(n) * 4;
  return {moved / *std::min_element(copy_ms.begin(), copy_ms.end()) / 1e6,
          moved / *std::min_element(inplace_ms.begin(), inplace_ms.end()) / 1e6};
}

// The fastest of `runs` after a warm-up (see measure_bandwidth). With `beat` (a rate in TFLOP/s
// already measured for another dtype): stops after the warm-up when that run alone is more
// than 3x slower - a dtype the device only emulates (bf16 on a CPU without AVX512_BF16/AMX) can
// take a minute per 2048^3 product and cannot be the faster one.
double measure_matmul_tflops(c10::Device device, int n, at::ScalarType dtype, int runs, double beat = 0) {
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor a = at::randn({n, n}, opts).to(dtype), b = at::randn({n, n}, opts).to(dtype);
  at::Tensor c = at::empty({n, n}, a.options());
  const double flop = 2.0 * static_cast<double>(n) * n * n;
  std::vector<double> ms;
  for (int i = 0; i <= runs; ++i) {
    synchronize(device);
    const auto t0 = Clock::now();
    at::mm_out(c, a, b);
    synchronize(device);
    const double t = ms_since(t0);
    if (i) ms.push_back(t);
    if (i == 0 && beat > 0 && flop / t / 1e9 < beat / 3) return flop / t / 1e9;
  }
  return flop / *std::min_element(ms.begin(), ms.end()) / 1e9;
}

constexpr int kFloorRuns = 7;

at::ScalarType dtype_named(const std::string& name) {
  return name == "bf16" ? at::kBFloat16 : name == "fp16" ? at::kHalf : at::kFloat;
}

// The floor's times from its rates: matmuls at the matmul rate, AdamW's bytes at the faster of
// the two bandwidths (AdamW reads and writes its tensors in place).
void floor_from_rates(BenchFloor& f) {
  f.optimizer_ms = f.optimizer_bytes / f.copy_gbps / 1e6;
  f.optimizer_inplace_ms = f.optimizer_bytes / f.inplace_gbps / 1e6;
  f.matmul_ms = f.step_flops > 0 ? f.step_flops / (f.matmul_tflops * 1e12) * 1e3 : 0;
  f.floor_ms = f.matmul_ms + std::min(f.optimizer_ms, f.optimizer_inplace_ms);
}

// Machine rates at the current settings (accelkit's threads and BLAS kernels): copy bandwidth,
// and the matmul rate of accelkit's dtype and of the other one of fp32 / bf16 - the floor takes
// the faster, so a slow choice of dtype cannot lower the bar. `step(i)` reports progress.
BenchFloor measure_floor(c10::Device device, bool gpu, const BenchOptions& o, const ModelSpec& spec,
                         at::ScalarType accel_dtype, std::int64_t params, const std::function<void(int)>& step) {
  const bool optimizer_only = spec.model == "optimizer";
  BenchFloor f;
  f.copy_bytes = o.floor_copy_bytes ? o.floor_copy_bytes : (gpu ? (1LL << 30) : (512LL << 20));
  f.runs = kFloorRuns;
  const Bandwidth bw = measure_bandwidth(device, f.copy_bytes, f.runs);
  f.copy_gbps = bw.copy_gbps;
  f.inplace_gbps = bw.inplace_gbps;
  f.optimizer_bytes = 28.0 * static_cast<double>(params);  // fp32 AdamW: read p, g, m, v; write p, m, v
  if (!optimizer_only) {
    step(1);
    f.matmul_n = o.floor_matmul_n ? o.floor_matmul_n : (gpu ? 8192 : 2048);
    struct Rate { at::ScalarType dtype; double tflops; };
    const at::ScalarType other = accel_dtype == at::kFloat ? at::kBFloat16 : at::kFloat;
    Rate fast{accel_dtype, measure_matmul_tflops(device, f.matmul_n, accel_dtype, f.runs)};
    // The other dtype first on a product 64x smaller: one the device only emulates (bf16 on a
    // CPU without AVX512_BF16 or AMX) takes up to a minute at the full size, and is shown at the
    // small one when it is more than 3x slower there.
    f.slower_matmul_n = std::max(64, f.matmul_n / 4);
    Rate slow{other, measure_matmul_tflops(device, f.slower_matmul_n, other, 1, fast.tflops)};
    if (slow.tflops >= fast.tflops / 3) {
      f.slower_matmul_n = f.matmul_n;
      slow.tflops = measure_matmul_tflops(device, f.matmul_n, other, f.runs, fast.tflops);
    }
    if (slow.tflops > fast.tflops) {
      std::swap(fast, slow);
      f.slower_matmul_n = f.matmul_n;
    }
    f.matmul_dtype = dtype_name(fast.dtype);
    f.matmul_tflops = fast.tflops;
    f.slower_matmul_dtype = dtype_name(slow.dtype);
    f.slower_matmul_tflops = slow.tflops;
    f.step_flops = bench_detail::training_matmul_flops(spec);
    f.note = spec.model == "mlp"   ? "matmuls at the measured rate + AdamW bytes at the copy bandwidth"
             : spec.model == "cnn" ? "convolution and linear FLOPs at the large-matmul rate + AdamW bytes: "
                                     "small convolutions never reach that rate, so this floor is far below reach"
                                   : "matmuls + AdamW bytes only; softmax, layer norm, GELU left out";
  } else {
    f.note = "AdamW bytes (28 per fp32 parameter) at the copy bandwidth";
  }
  floor_from_rates(f);
  f.how = "the best of " + std::to_string(f.runs) + " runs before the timed steps";
  f.measured = true;
  return f;
}

// After the timed steps: the rates once more (a rate is the best the machine reached, so the
// floor keeps the higher of the two measurements), and when a step of the run was still faster
// than the floor, once more at three times the runs. A floor still above a measured step is no
// lower bound for this run: it is left out, saying why.
void confirm_floor(BenchFloor& f, c10::Device device, double fastest_step_ms) {
  auto measure_again = [&](int runs) {
    const Bandwidth bw = measure_bandwidth(device, f.copy_bytes, runs);
    f.copy_gbps = std::max(f.copy_gbps, bw.copy_gbps);
    f.inplace_gbps = std::max(f.inplace_gbps, bw.inplace_gbps);
    if (f.step_flops > 0)
      f.matmul_tflops = std::max(f.matmul_tflops, measure_matmul_tflops(device, f.matmul_n, dtype_named(f.matmul_dtype), runs));
    floor_from_rates(f);
  };
  measure_again(f.runs);
  f.how = "the best of " + std::to_string(f.runs) + " runs before and " + std::to_string(f.runs) + " after the timed steps";
  if (f.floor_ms > fastest_step_ms) {
    measure_again(3 * f.runs);
    f.how += ", and " + std::to_string(3 * f.runs) + " more after a step beat the floor";
  }
  if (f.floor_ms > fastest_step_ms) {
    std::ostringstream why;
    why.precision(3);
    why << "a step of this run took " << fastest_step_ms << " ms, less than the " << f.floor_ms
        << " ms these rates allow even when measured again: they are not this machine's best (another load, or a "
           "rate the step's shapes beat), so the floor is no lower bound here";
    f.left_out = why.str();
  }
}

// accelkit's fp32 step ran the device's own operator kernels: their sums round otherwise than
// LibTorch's, and an optimizer's steps grow such differences (Adam's first step moves every weight
// by about lr whatever its gradient's size, so a gradient near 0 that changes sign moves it by
// 2 lr). Half an ulp of random noise on a torchvision ResNet-18's BatchNorm outputs (batch 16, AdamW
// 1e-3) moved its loss by 1e-4 to 3e-3 relative after 3 steps.
constexpr double kOwnKernelsTolerance = 1e-2;

// The fp32 tolerance for a model whose loss rounding alone moves further (measure_rounding_spread):
// this many times that spread.
constexpr double kSpreadFactor = 10;

std::string tolerance_why(const BenchOptions& o, const ModelSpec& spec, const Runner& accel,
                          std::uint64_t own_kernel_calls, bool kernels_shut_for_random) {
  if (o.tolerance > 0) return "set by the caller";
  if (accel.dtype == at::kFloat && !accel.plan.tf32 && kernels_shut_for_random)
    return "both fp32: only summation order differs. The model draws random numbers (dropout), so every variant's "
           "check steps start from the same seed, and accelkit's ran LibTorch's own kernels: the plugin draws "
           "dropout's masks from its own generator, so they differ from LibTorch's by design (its draws are checked "
           "in its tests)";
  if (spec.model == "optimizer")
    return "both fp32 with the same update rule: only float rounding differs (~1e-7 relative per step), so 1e-5 "
           "catches any wrong scalar or skipped element";
  if (accel.dtype == at::kFloat && accel.plan.tf32)
    return "accelkit's fp32 matmuls run in TF32 (unit roundoff 2^-11 ~ 5e-4 per product, sums in fp32): through 3 "
           "steps the loss moves well under 1e-3 relative; 5e-3 still catches a wrong kernel or a lost update";
  if (accel.dtype == at::kFloat && own_kernel_calls > 0)
    return "both fp32, but accelkit's steps ran the device's own operator kernels (" + std::to_string(own_kernel_calls) +
           " calls), whose sums round otherwise than LibTorch's, and the optimizer's steps grow that: half an ulp of "
           "noise on a ResNet-18's BatchNorm outputs moved its loss by up to 3e-3 relative after 3 AdamW steps. 1e-2 "
           "still catches a lost update; the kernels themselves are checked against LibTorch and fp64 in the tests";
  if (accel.dtype == at::kFloat)
    return "both fp32: only summation order (threads, kernels) differs";
  return std::string("accelkit runs matmuls in ") + dtype_name(accel.dtype) +
         " (8 significant bits for bf16, unit roundoff 2^-9 ~ 2e-3; fp16 2^-12) against fp32; through 3 steps the "
         "mean loss moves well under 1e-2 relative, while a real fault (wrong kernel, lost update, bad cast) moves "
         "it by 10% or more. 2e-2 = about 10x bf16's roundoff separates the two";
}


}  // namespace

// --data-ms: every variant's steps fed by a producer of `o.data_ms` ms of CPU work per batch,
// timed in blocks of kDataBlock steps (synchronised at the block's ends only, as a training
// loop runs), the variants alternating block by block in a fresh order each round. The
// accelkit variant (runners[1]) takes its batches through a Prefetcher made for the block; the
// others produce each batch in the step. Each batch is copied into the static x (a captured
// step reads it there; an eager one pays the same copy). One sample per block: its mean step.
namespace {

constexpr int kDataBlock = 8;

BenchData time_with_data(Runtime& rt, const BenchOptions& o, std::vector<Runner>& runners, at::Tensor& x,
                         const at::Tensor& target, std::vector<std::vector<double>>& samples,
                         const BenchProgressFn& progress, const std::string& label, std::mt19937_64& rng) {
  const c10::Device device = x.device();
  const at::Tensor x_host = x.to(at::kCPU);
  const PrefetchOptions prefetch = prefetch_options(rt);
  // CPU work standing in for decoding: square roots until the time is spent, then a fresh batch.
  auto produce = [&]() -> at::Tensor {
    const auto until = Clock::now() + std::chrono::duration<double, std::milli>(o.data_ms);
    double sink = 0;
    std::uint64_t k = 0;
    while (Clock::now() < until)
      for (int j = 0; j < 256; ++j) sink += std::sqrt(static_cast<double>(++k));
    at::Tensor batch = x_host.clone();
    if (sink < 0) batch.zero_();  // never true; keeps the work from being optimised away
    return batch;
  };
  BenchData d;
  d.producer_ms = o.data_ms;
  d.prefetch = static_cast<int>(prefetch.depth);
  d.block_steps = kDataBlock;
  std::vector<double> waits, produces;
  auto block = [&](std::size_t i) {
    Runner& run = runners[i];
    if (run.enter()) run.step(x, target);  // untimed, as in timed_step
    synchronize(device);
    const auto t0 = Clock::now();
    if (i == 1) {
      int made = 0;
      Prefetcher<at::Tensor> batches(
          [&]() -> std::optional<at::Tensor> {
            if (made == kDataBlock) return std::nullopt;
            ++made;
            return produce();
          },
          prefetch);
      while (auto b = batches.next()) {
        x.copy_(*b);
        run.step(x, target);
      }
      synchronize(device);
      const PrefetchStats st = batches.stats();
      waits.push_back(st.waited_ms / kDataBlock);
      produces.push_back(st.produce_ms / kDataBlock);
    } else {
      for (int k = 0; k < kDataBlock; ++k) {
        x.copy_(produce());
        run.step(x, target);
      }
      synchronize(device);
    }
    samples[i].push_back(ms_since(t0) / kDataBlock);
  };
  const int rounds = (o.steps + kDataBlock - 1) / kDataBlock;
  std::vector<std::size_t> order(runners.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  for (int round = 0; round < rounds; ++round) {
    report(progress, label, "timing", round * kDataBlock, rounds * kDataBlock);
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i : order) block(i);
  }
  report(progress, label, "timing", rounds * kDataBlock, rounds * kDataBlock);
  d.accelkit_wait_ms = median_of(waits);
  d.accelkit_produce_ms = median_of(produces);
  return d;
}

// --batch auto: the largest batch of this model that trains on the device (the accelkit
// variant's settings), from the model's default batch; its input at the batch asked for, a
// random target of the output's shape (the memory does not depend on the values).
BatchDecision find_bench_batch(Runtime& rt, const ModelSpec& spec, const BenchOptions& o, const BenchProgressFn& progress) {
  Net net = bench_detail::make_net(spec, o.seed);
  rt.prepare(*net.module);
  BatchProblem problem;
  problem.name = "bench " + spec.model + " (" + bench_detail::describe(spec) + ")";
  problem.model = net.module.get();
  problem.forward = [&net](const at::Tensor& in) { return net.forward(in); };
  problem.loss = [](const at::Tensor& y, const at::Tensor& t) { return at::mse_loss(y, t); };
  const c10::Device device = rt.device();
  problem.make_batch = [&](std::int64_t b) {
    ModelSpec at_b = spec;
    at_b.batch = static_cast<int>(b);
    at::Tensor x = bench_detail::make_input(at_b, device);
    at::Tensor y;
    {
      at::NoGradGuard no_grad;
      compat::AutocastGuard fp32(device.type(), false, compat::autocast_dtype(device.type()));
      y = net.forward(x);
    }
    return std::make_pair(x, at::randn(y.sizes(), y.options().dtype(at::kFloat)));
  };
  // The accelkit variant may train with master weights (if step tuning keeps bf16): their
  // fp32 copy counted, the larger footprint.
  problem.forwards = ForwardOwner::accelkit;
  BatchSearchOptions search;
  search.start = spec.batch;
  search.max = o.batch_max > 0 ? o.batch_max : std::min<std::int64_t>(search.max, INT32_MAX);
  search.start = std::min<std::int64_t>(search.start, search.max);
  // The bench runs ~150 steps at the answer: on a CPU, steps of at most kBenchBatchStepSeconds
  // (or the batch_step_limit setting, if lower and not 0).
  const double setting = *rt.context().config().batch_step_limit;
  search.max_step_seconds = setting > 0 ? std::min(setting, kBenchBatchStepSeconds) : kBenchBatchStepSeconds;
  int trials = 0;
  search.trial_starts = [&](std::int64_t b) {
    report(progress, spec.model, "batch", trials, 0, "at batch " + std::to_string(b) + ": running");
  };
  search.progress = [&](const BatchTrial& t) {
    std::ostringstream d;
    d << "at batch " << t.batch << ": " << format_bytes(t.peak_bytes) << ", " << static_cast<int>(t.seconds * 1e3)
      << " ms (" << t.note << ")";
    report(progress, spec.model, "batch", ++trials, 0, d.str());
  };
  return accelkit::find_batch_size(rt, problem, search);
}

// GPU-sized defaults on a GPU; a CPU, an NPU or a reference device keeps the CPU's.
bool gpu_sized(const Runtime& rt) {
  const DeviceKind kind = rt.device_handle()->info().kind;
  return kind == DeviceKind::discrete_gpu || kind == DeviceKind::integrated_gpu;
}

// The model that trains: a built-in one at the options' batch and width, or a model file with
// the shapes of its --input options.
ModelSpec train_spec(const BenchOptions& o, bool gpu) {
  const bool file = !bench_detail::is_builtin_model(o.model);
  ModelSpec spec = bench_detail::make_spec(file ? "file" : o.model, o.batch, o.width, gpu);
  if (file) {
    spec.file = o.model;
    for (const auto& in : o.inputs) spec.inputs.push_back(bench_detail::parse_input(in));
  }
  return spec;
}

// `accelkit bench` in training mode: the variants (one Runner each) from identical weights and
// data, the accuracy check, the floors, the timed steps, the result. run() calls the phases in
// order; each member below does one of them.
class TrainBench {
 public:
  TrainBench(Runtime& runtime, const BenchOptions& options, const BenchProgressFn& progress_fn)
      : rt(runtime),
        o(options),
        progress(progress_fn),
        device(rt.device()),
        file(!bench_detail::is_builtin_model(o.model)),
        gpu(gpu_sized(rt)),
        spec(train_spec(o, gpu)),
        optimizer_only(spec.model == "optimizer"),
        label(file ? o.model : spec.model) {}

  BenchResult run() {
    start_result();
    make_data();
    if (!optimizer_only && !file && *rt.context().config().autotune) tune_on_model();
    r.decisions = rt.context().decisions();
    add_runners();
    choose_accelkit_step_mode();
    run_check_steps();
    measure_rounding_spread();
    judge_accuracy();
    refuse_failed_check();
    // Floors: machine rates measured now, at accelkit's thread count (again after the timing).
    if (o.floors && !file) measure_floors();
    // Warm-up, then alternate: one timed step of each variant per round.
    warm_up();
    measure_step_peaks();
    time_steps();
    if (!o.trace.empty()) trace_steps(r, o, device, [&] { runners[1].step(x, target); });
    summarize();
    return std::move(r);
  }

 private:
  // With --batch auto, the batch the finder chose; then what the result says before anything
  // runs, and the machine's load.
  void start_result() {
    std::optional<BatchDecision> sized;
    if (o.batch_auto) {
      sized = find_bench_batch(rt, spec, o, progress);
      spec.batch = static_cast<int>(sized->batch);
    }
    r.shape = bench_detail::describe(spec);
    r.batch = spec.batch;
    r.width = spec.width;
    r.batch_finder = std::move(sized);
    begin_result(r, rt, o, label, progress);
    new_device::reset_fallback_counts();
  }

  // Data: identical for every variant. The target is a fixed random teacher's output, so the
  // loss depends on the whole model output (not on the target's own variance).
  void make_data() {
    if (optimizer_only) return;
    at::manual_seed(o.seed + 1);
    x = bench_detail::make_input(spec, device);
    Net teacher = bench_detail::make_net(spec, o.seed + 2);
    teacher.to(device);
    at::NoGradGuard no_grad;
    // In fp32 whatever the plan applied to this thread: the target is the reference.
    compat::AutocastGuard fp32(device.type(), false, compat::autocast_dtype(device.type()));
    if (file) {
      // A user's model is its own teacher: the target is random, of its output's shape.
      at::Tensor y = bench_detail::forward_or_explain(teacher, x, o);
      if (!y.is_floating_point()) throw std::invalid_argument("bench: --mode train needs a floating-point output");
      target = at::randn(y.sizes(), y.options().dtype(at::kFloat));
    } else {
      target = teacher.forward(x).detach();
    }
  }

  // Profile auto: tune on this very model and data (from the cache when it has the answer).
  void tune_on_model() {
    Net net = bench_detail::make_net(spec, o.seed);
    rt.prepare(*net.module);
    TuneProblem problem;
    problem.name = "bench " + spec.model + " (" + r.shape + ")";
    problem.model = net.module.get();
    problem.forward = [&net](const at::Tensor& in) { return net.forward(in); };
    problem.loss = [](const at::Tensor& y, const at::Tensor& t) { return at::mse_loss(y, t); };
    problem.input = x;
    problem.target = target;
    TuneOptions tune;
    tune.progress = [&](const TuneProgress& tp) { report(progress, label, "autotune", tp.done, tp.total); };
    r.autotune = accelkit::autotune(rt, problem, tune);
  }

  // One variant's runner: its own copy of the model (or of the optimizer model's parameters)
  // and its optimizer, with the variant's settings.
  Runner make_runner(const std::string& name, int threads, bool autocast, at::ScalarType dtype, bool accelkit) {
    Runner run;
    run.device = device;
    run.autocast = autocast && dtype != at::kFloat && !optimizer_only;  // the optimizer model has no forward
    run.dtype = run.autocast ? dtype : at::kFloat;
    if (optimizer_only) {
      run.params = bench_detail::make_optimizer_params(spec, o.seed, device);
    } else {
      run.net = bench_detail::make_net(spec, o.seed);
      if (accelkit && run.net.module) rt.prepare(*run.net.module);
      else if (accelkit) rt.prepare(*run.net.script);
      else run.net.to(device);
      run.params = run.net.parameters();
    }
    run.info.name = name;
    run.info.threads = threads;
    run.info.dtype = dtype_name(run.dtype);
    run.plans = &*plans;
    run.plan = accelkit ? rt.precision() : plain_plan(threads);
    if (name == "tuned") run.plan.tf32 = tuned_tf32;
    if (name == "tuned" && spec.model == "cnn") {
      // What a hand-tuner does for a CNN on a CPU: channels-last weights and input (oneDNN's
      // preferred layout for convolutions).
      at::NoGradGuard no_grad;
      for (auto& p : run.params)
        if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
      run.channels_last = true;
    }
    if (accelkit) {
      OptimizerChoice choice = rt.make_adamw(run.params, adamw, /*model_weights=*/!optimizer_only, accel_forwards);
      run.opt = choice.optimizer;
      run.info.optimizer = choice.implementation;
      if (!optimizer_only) {
        run.scaler.emplace(rt.make_loss_scaler());
        run.info.loss_scaling = run.scaler->enabled();
      }
      run.hook = o.candidate_hook;
      run.grads_to_none = true;
    } else if (name == "tuned" && tuned_fused) {
      run.opt = std::make_shared<support::AtenFusedAdamW>(run.params, adamw_options(adamw));
      run.info.optimizer = "at::_fused_adamw_";
    } else {
      run.opt = std::make_shared<torch::optim::AdamW>(run.params, adamw_options(adamw));
      run.info.optimizer = "torch::optim::AdamW";
    }
    return run;
  }

  // The variants, in this order: the plain-LibTorch baseline, accelkit, then (as the options
  // ask) the hand-tuned and the eager ones.
  void add_runners() {
    baseline_threads = o.baseline_threads > 0 ? o.baseline_threads : at::intraop_default_num_threads();
    accel_threads = rt.precision().threads > 0 ? rt.precision().threads : at::get_num_threads();
    plans.emplace(rt);
    tuned_fused = support::AtenFusedAdamW::available(device.type());
    tuned_tf32 = rt.device_handle()->info().capabilities.has(Capability::tf32);
    runners.push_back(make_runner("baseline", baseline_threads, false, at::kFloat, false));
    runners.back().info.description = "plain LibTorch: fp32, LibTorch's default threads, torch::optim::AdamW";
    const StepConfig accel_step = tuned_step();
    r.step_tuning = rt.step_tuning();
    if (accel_step.autocast && accel_step.dtype == at::kBFloat16) accel_forwards = ForwardOwner::accelkit;
    runners.push_back(make_runner("accelkit", accel_step.threads, accel_step.autocast, accel_step.dtype, true));
    runners.back().plan.threads = accel_step.threads;
    runners.back().plan.autocast = accel_step.autocast;
    runners.back().info.description = "accelkit: the negotiated precision plan, threads and optimizer";
    if (o.vs_tuned) add_tuned_runner();
    tuned_i = o.vs_tuned ? 2 : 0;
    eager_i = o.vs_eager ? runners.size() : 0;
    if (o.vs_eager) {
      runners.push_back(make_runner("eager", accel_step.threads, accel_step.autocast, accel_step.dtype, true));
      runners.back().plan.threads = accel_step.threads;
      runners.back().info.description = "accelkit's settings, the step run eagerly (no graph capture)";
      runners.back().step_mode = "eager: --vs-eager's reference";
    }
    std::int64_t count = 0;
    for (const auto& p : runners.front().params) count += p.numel();
    r.params = count;
  }

  // Step tuning (on by default): the accelkit configuration is what the step tuner keeps after
  // observing steps of this model - run here on a copy of it, so that the variants compared
  // below still start from identical weights - or what its cache holds.
  StepConfig tuned_step() {
    StepConfig accel_step{rt.precision().autocast, rt.autocast_dtype(), accel_threads};
    if (!optimizer_only && rt.step_tuning().state == StepTuningStatus::State::observing) {
      Runner probe = make_runner("accelkit", accel_threads, rt.precision().autocast, rt.autocast_dtype(), true);
      probe.step_tuned = &rt;
      constexpr int kMaxTuningSteps = 400;
      for (int s = 0; s < kMaxTuningSteps && rt.step_tuning().state == StepTuningStatus::State::observing; ++s) {
        if (s % 10 == 0) report(progress, label, "step tuning", s, 0);
        probe.step(x, target);
        synchronize(device);
      }
    }
    if (rt.step_tuning().state == StepTuningStatus::State::decided) {
      const StepTuningStatus& st = rt.step_tuning();
      const StepConfig& c = st.candidates[st.chosen];
      accel_step = {c.autocast, c.autocast ? c.dtype : at::kFloat, c.threads > 0 ? c.threads : accel_threads};
    }
    return accel_step;
  }

  // Hand-tuned LibTorch: all physical cores, bf16 autocast where the device computes bf16
  // natively (on a CPU without AVX512_BF16 or AMX it is emulated and slower than fp32: a
  // hand-tuner would not pick it), TF32 and the fused AdamW where the device has them.
  void add_tuned_runner() {
    const bool bf16 = rt.device_handle()->info().capabilities.has(Capability::bf16);
    runners.push_back(make_runner("tuned", physical_cores(rt), bf16, bf16 ? at::kBFloat16 : at::kFloat, false));
    runners.back().info.description = std::string("hand-tuned LibTorch: threads = physical cores, ") +
                                      (bf16 ? "bf16 autocast, " : "fp32 (no native bf16), ") +
                                      (tuned_tf32 ? "TF32, " : "") +
                                      (tuned_fused ? "at::_fused_adamw_" : "torch::optim::AdamW");
  }

  // The accelkit step as the `compile` setting and the device allow (graph capture needs a
  // forward: the optimizer model stays a bare step). x and target are static: fine for a graph.
  void choose_accelkit_step_mode() {
    const Setting<CompileMode>& compile = rt.context().config().compile;
    if (optimizer_only) runners[1].step_mode = "eager: the optimizer model has no forward to capture";
    else if (*compile == CompileMode::off)
      runners[1].step_mode = "eager: compile = off (from " + compile.from() + ")";
    else runners[1].capture(rt, x, target);
  }

  // The state of the device's default generator ("" where it has none to read).
  std::string generator_state() const {
    try {
      const at::Tensor state = at::globalContext().defaultGenerator(device).get_state();
      return std::string(static_cast<const char*>(state.data_ptr()), static_cast<std::size_t>(state.nbytes()));
    } catch (const std::exception&) {
      return {};
    }
  }

  // Accuracy check: a few steps from identical weights and data, before anything is timed.
  // Each variant's steps start from the same seed, so a model that draws random numbers
  // (dropout) draws the same ones in each; where the baseline's steps drew any, accelkit's run
  // LibTorch's own kernels, since a plugin's (the CPU plugin's bernoulli_) may draw them from
  // another generator.
  void run_check_steps() {
    bool draws_random = false;
    for (std::size_t i = 0; i < runners.size(); ++i) {
      report(progress, label, "check", static_cast<int>(i), static_cast<int>(runners.size()));
      Runner& run = runners[i];
      torch::manual_seed(o.seed + 3);
      const std::string generator_before = i == 0 ? generator_state() : std::string();
      std::vector<std::string> own_kernels;
      if (i == 1 && draws_random && !run.plan.kernels.empty()) {
        own_kernels.swap(run.plan.kernels);
        accel_kernels_shut_for_random = true;
        run.plans->forget();
      }
      const std::uint64_t calls_before = i == 1 ? plugin_kernel_calls(rt) : 0;
      take_check_steps(run);
      if (i == 0) draws_random = generator_state() != generator_before;
      if (!own_kernels.empty()) {
        run.plan.kernels.swap(own_kernels);
        run.plans->forget();
      }
      if (i == 1) accel_kernel_calls = plugin_kernel_calls(rt) - calls_before;
      run.info.blas = applied_value(rt, PlanField::blas_kernels);
      run.info.matmuls = matmul_library(rt, run.dtype);
    }
  }

  // How far the baseline's check values move when only rounding changes: its check steps again,
  // from its weights each moved by up to an ulp at random (its own seed for dropout, as before).
  // A model that amplifies that beyond the fp32 tolerance (BatchNorm over a small batch, and
  // Adam's first steps, which move every weight by about lr whatever its gradient's size:
  // torchvision's MobileNetV2 at batch 16 moved 4e-4 relative after 3 AdamW steps with every
  // kernel LibTorch's) gets a tolerance of 10x that (judge_accuracy). fp32 training only, where
  // the caller set no tolerance.
  void measure_rounding_spread() {
    if (optimizer_only || o.tolerance > 0 || runners[1].dtype != at::kFloat || runners[1].plan.tf32) return;
    report(progress, label, "rounding spread", 0, 1);
    Runner again = make_runner("baseline", baseline_threads, false, at::kFloat, false);
    {
      at::NoGradGuard no_grad;
      // In fp64 on the CPU, rounded back once: each weight moves to a neighbouring value or stays.
      at::Generator gen = at::detail::createCPUGenerator(o.seed + 5);
      for (auto& p : again.params) {
        if (!p.is_floating_point()) continue;
        const at::Tensor u = at::rand(p.sizes(), gen, at::TensorOptions().dtype(at::kDouble));
        const at::Tensor moved = p.detach().to(at::kCPU, at::kDouble) * ((u - 0.5) * std::ldexp(1.0, -22) + 1.0);
        p.copy_(moved.to(p.scalar_type()));
      }
    }
    torch::manual_seed(o.seed + 3);
    take_check_steps(again);
    r.accuracy.rounding_spread = diff_to_baseline(again);
  }

  // A variant's check steps: the loss of each (none for the optimizer model), then the final
  // loss or the parameters' norm, into its check values.
  void take_check_steps(Runner& run) {
    for (int s = 0; s < o.check_steps; ++s) {
      at::Tensor l = run.step(x, target);
      if (!optimizer_only) run.info.check.push_back(l.item<double>());
    }
    run.info.check.push_back(run.final_value(x, target));
  }

  // The worst relative difference of a variant's check values (or parameters) from the
  // baseline's.
  double diff_to_baseline(const Runner& run) const {
    if (optimizer_only) return params_rel_diff(run.params, runners[0].params);
    double worst = 0;
    for (std::size_t s = 0; s < run.info.check.size(); ++s)
      worst = std::max(worst, rel_diff(run.info.check[s], runners[0].info.check[s]));
    return worst;
  }

  // accelkit against the baseline, within a tolerance that follows the precision it runs in;
  // the variants as they ran into the result.
  void judge_accuracy() {
    BenchAccuracy& acc = r.accuracy;
    acc.compared = optimizer_only ? "parameters" : "loss";
    acc.steps = o.check_steps;
    const Runner& accel = runners[1];
    const bool tf32_only = !optimizer_only && accel.dtype == at::kFloat && accel.plan.tf32;
    const bool own_kernels = !optimizer_only && accel.dtype == at::kFloat && !tf32_only && accel_kernel_calls > 0;
    acc.tolerance = o.tolerance > 0 ? o.tolerance
                    : optimizer_only ? 1e-5
                    : tf32_only      ? 5e-3
                    : own_kernels    ? kOwnKernelsTolerance
                    : accel.dtype == at::kFloat ? 1e-4
                                                : 2e-2;
    acc.why = tolerance_why(o, spec, accel, accel_kernel_calls, accel_kernels_shut_for_random);
    if (acc.rounding_spread && kSpreadFactor * *acc.rounding_spread > acc.tolerance) {
      acc.tolerance = kSpreadFactor * *acc.rounding_spread;
      std::ostringstream why;
      why << acc.why << ". Rounding alone moves this model's loss further: the baseline's own check steps, from its "
          << "weights each moved by up to an ulp at random, moved it by " << *acc.rounding_spread
          << " relative, so the tolerance is " << kSpreadFactor << "x that";
      acc.why = why.str();
    }
    acc.rel_diff = diff_to_baseline(accel);
    if (o.vs_tuned) acc.tuned_rel_diff = diff_to_baseline(runners[tuned_i]);
    acc.ok = acc.rel_diff <= acc.tolerance;
    for (Runner& run : runners)
      run.info.step_mode = run.graph ? run.graph->mode() : run.step_mode;
    r.baseline = runners[0].info;
    r.accelkit = runners[1].info;
    if (o.vs_tuned) r.tuned = runners[tuned_i].info;
    if (o.vs_eager) r.eager = runners[eager_i].info;
  }

  // BenchCheckError (the result so far with it) for a check value that is not finite, or for
  // accelkit outside the tolerance.
  void refuse_failed_check() {
    const BenchAccuracy& acc = r.accuracy;
    for (const Runner& run : runners) {
      for (std::size_t s = 0; s < run.info.check.size(); ++s) {
        if (std::isfinite(run.info.check[s])) continue;
        std::ostringstream msg;
        msg << "accuracy check: " << run.info.name << "'s " << (optimizer_only ? "parameter norm" : "loss")
            << (s + 1 == run.info.check.size() ? " after the last step" : " at step " + std::to_string(s + 1))
            << " is " << run.info.check[s] << " (" << spec.model << ", " << run.info.dtype << ")";
        r.error = msg.str();
        throw BenchCheckError(r.error, r);
      }
    }
    if (!acc.ok) {
      std::ostringstream msg;
      msg << "accuracy check: accelkit's " << acc.compared << " differs from the fp32 baseline's by " << acc.rel_diff
          << " relative after " << acc.steps << " steps (tolerance " << acc.tolerance << ")";
      r.error = msg.str();
      throw BenchCheckError(r.error, r);
    }
  }

  void measure_floors() {
    report(progress, label, "floors", 0, 2);
    runners[1].enter();
    r.floor = measure_floor(device, gpu, o, spec, runners[1].dtype, r.params,
                            [&](int i) { report(progress, label, "floors", i, 2); });
  }

  void warm_up() {
    for (int w = 0; w < o.warmup; ++w) {
      report(progress, label, "warmup", w, o.warmup);
      for (Runner& run : runners) run.step(x, target);
    }
  }

  // Each variant's step peak: one untimed step, measured by the device's allocator (a GPU's) or,
  // on the host, as the tensor bytes the step allocates (LibTorch's memory reporting, as the
  // batch finder counts them): the process's resident set does not move for memory the
  // allocator reuses, so its peak over the start reads 0.
  void measure_step_peaks() {
    const bool host_memory = device.type() == c10::DeviceType::CPU;
    step_peaks.resize(runners.size());
    for (std::size_t i = 0; i < runners.size(); ++i) {
      if (runners[i].enter()) runners[i].step(x, target);
      synchronize(device);
      if (host_memory) {
        compat::TensorMemoryMeter meter(c10::DeviceType::CPU);
        runners[i].step(x, target);
        step_peaks[i] = static_cast<std::uint64_t>(std::max<std::int64_t>(0, meter.peak()));
        r.memory_source = "tensor bytes the step allocates (LibTorch's memory reporting)";
        continue;
      }
      MemoryScope scope(rt.device_handle(), "step");
      runners[i].step(x, target);
      synchronize(device);
      const MemoryReport m = scope.stop();
      if (m.measured) step_peaks[i] = m.peak_over_start();
      r.memory_source = m.measured ? m.source : "not measured: " + m.note;
    }
  }

  // The timed steps (with --data-ms, fed by a producer: time_with_data), then what else ran
  // on the machine meanwhile.
  void time_steps() {
    samples.resize(runners.size());
    phases.resize(runners.size());
    std::mt19937_64 rng(o.seed);
    const std::optional<CpuSample> timing_start = sample_cpu();
    if (o.data_ms > 0) {
      r.data = time_with_data(rt, o, runners, x, target, samples, progress, label, rng);
      for (std::size_t i = 0; i < runners.size(); ++i)
        for (auto& p : phases[i]) p.assign(1, 0.0);  // blocks are timed whole: no phases
    } else {
      time_rounds(rng);
    }
    int most_threads = 0;
    for (const Runner& run : runners) most_threads = std::max(most_threads, run.info.threads);
    machine_after(r.machine, timing_start, most_threads);
  }

  // o.steps rounds of one timed step of each variant.
  void time_rounds(std::mt19937_64& rng) {
    std::vector<std::size_t> order(runners.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    for (int round = 0; round < o.steps; ++round) {
      report(progress, label, "timing", round, o.steps);
      // A fresh (seeded) order every round, so no variant always runs right after another one
      // (the step after a 1-thread phase starts its second core cold).
      std::shuffle(order.begin(), order.end(), rng);
      for (std::size_t i : order) {
        double ph[3] = {0, 0, 0};
        samples[i].push_back(runners[i].timed_step(x, target, ph));
        for (int p = 0; p < 3; ++p) phases[i][p].push_back(ph[p]);
      }
    }
    report(progress, label, "timing", o.steps, o.steps);
  }

  // Runner i's times, phases and step peak into its variant in the result.
  void finish_variant(BenchVariant& v, std::size_t i) {
    if (runners[i].graph) v.step_mode = runners[i].graph->mode();  // a fallback while timing shows
    v.time = stats_of(samples[i]);
    v.forward_ms = median_of(phases[i][0]);
    v.backward_ms = median_of(phases[i][1]);
    v.optimizer_ms = median_of(phases[i][2]);
    v.step_peak_bytes = step_peaks[i];
    if (v.step_peak_bytes && v.step_mode == "graph")
      v.step_peak_note = "a replay of the captured step: its working memory is the graph's private pool, held since the "
                         "recording, not counted here";
  }

  // The variants' figures, the speedups, the floor confirmed, the machine's load after.
  void summarize() {
    finish_variant(r.baseline, 0);
    finish_variant(r.accelkit, 1);
    if (o.vs_tuned) {
      finish_variant(*r.tuned, tuned_i);
      r.speedup_vs_tuned = r.tuned->time.median_ms / r.accelkit.time.median_ms;
    }
    if (o.vs_eager) {
      finish_variant(*r.eager, eager_i);
      r.speedup_vs_eager = r.eager->time.median_ms / r.accelkit.time.median_ms;
    }
    r.speedup = r.baseline.time.median_ms / r.accelkit.time.median_ms;
    r.speedup_min = r.baseline.time.min_ms / r.accelkit.time.min_ms;
    if (r.floor.measured) confirm_floors();
    r.load_after = load_average();
    for (const auto& f : new_device::fallback_counts()) r.fallbacks.emplace_back(f.op, f.calls);
  }

  // The floor measured again after the timing, against the fastest step of any variant.
  void confirm_floors() {
    report(progress, label, "floors again", 0, 1);
    runners[1].enter();
    double fastest = r.accelkit.time.min_ms;
    for (const BenchVariant* v : {&r.baseline, r.tuned ? &*r.tuned : nullptr, r.eager ? &*r.eager : nullptr})
      if (v) fastest = std::min(fastest, v->time.min_ms);
    confirm_floor(r.floor, device, fastest);
    r.floor.measured_over_floor = r.accelkit.time.median_ms / r.floor.floor_ms;
    r.floor.floor_over_measured = r.floor.floor_ms / r.accelkit.time.median_ms;
  }

  Runtime& rt;
  const BenchOptions& o;
  const BenchProgressFn& progress;
  const c10::Device device;
  const bool file;  // a model file (TorchScript: training runs no .pt2 package), not a built-in model
  const bool gpu;
  ModelSpec spec;
  const bool optimizer_only;
  const std::string label;  // in progress and results
  BenchResult r;
  at::Tensor x, target;  // the data every variant trains on (none for the optimizer model)
  int baseline_threads = 0;
  int accel_threads = 0;
  // The plain-LibTorch variants: the device's settings as LibTorch has them unconfigured - no
  // TF32, the BLAS library's own kernels - at their thread counts (autocast comes from Runner).
  std::optional<PlanSwitch> plans;
  const AdamWConfig adamw{};
  // Hand-tuned LibTorch uses LibTorch's own fused AdamW where it has one for this device.
  bool tuned_fused = false;
  // A hand-tuner also turns TF32 on where the device has it (the fp32 matmuls left outside autocast).
  bool tuned_tf32 = false;
  // The bench's loop runs every forward of the accelkit variant's model under autocast, so
  // master_weights = auto gives it bf16 weights - once the step tuner has kept a bf16 autocast
  // configuration. Its probe trains fp32 weights: bf16 ones would leave the tuner only the
  // autocast candidates, and fp32 is the faster choice for some models (small CNNs here).
  ForwardOwner accel_forwards = ForwardOwner::program;
  std::vector<Runner> runners;  // baseline, accelkit, then tuned and eager as asked
  std::size_t tuned_i = 0;
  std::uint64_t accel_kernel_calls = 0;  // the device's own operator kernels run by accelkit's check steps
  bool accel_kernels_shut_for_random = false;  // accelkit's check steps ran LibTorch's kernels (random draws)
  std::size_t eager_i = 0;
  std::vector<std::optional<std::uint64_t>> step_peaks;
  std::vector<std::vector<double>> samples;
  std::vector<std::array<std::vector<double>, 3>> phases;
};

}  // namespace

BenchResult run_bench(Runtime& rt, const BenchOptions& o, const BenchProgressFn& progress) {
  validate(o);
  const bool file = !bench_detail::is_builtin_model(o.model);
  if (file) bench_detail::check_model_file(o);
  if (file && bench_mode(o) == "infer") return bench_detail::run_infer_bench(rt, o, progress);
  return TrainBench(rt, o, progress).run();
}

}  // namespace accelkit
