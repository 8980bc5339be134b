// accelkit bench: one training step of a reference model (or the optimizer step alone) timed
// three ways in one process, alternating every round:
//   baseline  plain LibTorch as a user writes it: fp32, LibTorch's default threads,
//             torch::optim::AdamW;
//   accelkit  the Runtime's negotiated settings: plan threads, autocast dtype, make_adamw(),
//             loss scaler, and (compile != off) the step through Runtime::capture_step;
//   tuned     (vs_tuned) hand-tuned LibTorch: threads = physical cores, bf16 autocast where
//             the device has native bf16, LibTorch's own at::_fused_adamw_ where it has one for
//             the device (else torch::optim::AdamW) - so accelkit's own gain is visible;
//   eager     (vs_eager) accelkit's settings with the step run eagerly: the captured step's
//             own gain, same process.
// Before timing, every variant runs a few steps from identical weights and data and its losses
// are compared with the baseline's (non-finite or out of tolerance: BenchCheckError). The
// floors (copy bandwidth, matmul rate) are measured in the same run.
//
// Thread-safety: run_bench changes LibTorch's thread count and the calling thread's autocast
// state while it runs and restores the accelkit settings before returning. One at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "accelkit/autotune.hpp"
#include "accelkit/batch_finder.hpp"
#include "accelkit/context.hpp"
#include "accelkit/step_tuning.hpp"
#include "accelkit/inference.hpp"
#include "accelkit/quantize.hpp"
#include "accelkit/trace.hpp"

namespace accelkit {

class Runtime;

struct BenchOptions {
  // mlp | transformer | cnn | optimizer, or the path of the user's model file: TorchScript, or
  // a .pt2 AOTInductor package (inference only; LibTorch >= 2.6). Then `inputs` are required
  // and `mode` says what is timed.
  std::string model = "mlp";
  // A model file's inputs, one per argument of its forward: "32x3x224x224[,dtype]".
  std::vector<std::string> inputs;
  // A model file: "infer" (default: a forward without autograd; accelkit's variant is
  // Runtime::optimize_for_inference) or "train" (forward, MSE against a random target of the
  // first output's shape, backward, AdamW). The built-in models train.
  std::string mode;
  int steps = 20;             // timed steps per variant, one per round
  int warmup = 3;             // untimed steps per variant before the first round
  int batch = 0;              // 0 = the model's default for the device type
  // The largest batch that fits the device's memory (Runtime::find_batch_size, starting from
  // the model's default), at most batch_max (0 = the finder's default); built-in training
  // models only. On a CPU its step is bounded to kBenchBatchStepSeconds as well (or the
  // batch_step_limit setting, if lower): the bench runs ~150 steps at it.
  bool batch_auto = false;
  int batch_max = 0;
  int width = 0;              // 0 = default: mlp D, transformer d_model, optimizer 4 x [W, W]
  bool vs_tuned = false;      // also time hand-tuned LibTorch
  // Also time the accelkit variant's settings with an eager step ("eager"), so a captured
  // step's gain is measured in the same process (built-in training models only).
  bool vs_eager = false;
  // > 0: before anything is timed, wait up to this many seconds for other processes to leave
  // the CPUs alone (BenchMachine says what was seen).
  double wait_quiet_s = 0;
  // A model file in inference mode: "int8" also times Runtime::quantize's INT8 Linear model,
  // "int8-static" its static INT8 convolutions and Linear layers calibrated on the bench's
  // inputs (a variant of its own, its output error shown; never chosen for accelkit: it is
  // lossy).
  std::string quantize;
  // > 0 (built-in training models): each step's input comes from a producer that spends this
  // many ms of CPU work per batch (a stand-in for decoding and augmentation). The accelkit
  // variant takes its batches through accelkit::Prefetcher (the `prefetch` setting, staged on
  // the device); the others produce each batch in the step, as a plain program does. The
  // variants then alternate in blocks of BenchData::block_steps steps (a fresh prefetcher per
  // block, so its thread never runs during another variant's steps).
  double data_ms = 0;
  // Not empty: after the timed rounds (so that they are not disturbed), trace_steps more steps
  // of the accelkit variant run under LibTorch's profiler (accelkit::Trace), each in a
  // profile_scope "accelkit step", written to this Chrome trace file (BenchResult::trace).
  std::string trace;
  int trace_steps = 5;
  bool floors = true;         // measure copy bandwidth and the matmul rate
  std::int64_t floor_copy_bytes = 0;  // per buffer; 0 = 512 MiB on CPU, 1 GiB on a GPU
  int floor_matmul_n = 0;             // n of the n^3 matmul; 0 = 2048 on CPU, 8192 on a GPU
  int check_steps = 3;        // accuracy check: steps from identical weights and data
  double tolerance = 0;       // relative; 0 = the model's default (see BenchAccuracy::why)
  // LibTorch's thread count as the process started, before Runtime::start changed it;
  // 0 = at::intraop_default_num_threads() (what LibTorch would pick unconfigured).
  int baseline_threads = 0;
  std::uint64_t seed = 20240901;
  // Test hook: breaks the candidate on purpose. Applied to the accelkit variant's model output
  // (mlp, transformer) or to its first parameter after each step (optimizer).
  std::function<void(at::Tensor&)> candidate_hook;
};

// Throws std::invalid_argument naming the option, the value and what is allowed.
void validate(const BenchOptions& options);

struct BenchStats {
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  std::vector<double> samples_ms;  // in round order
};

struct BenchVariant {
  std::string name;         // baseline | accelkit | tuned
  std::string description;  // "plain LibTorch: fp32, default threads, torch::optim::AdamW"
  int threads = 0;
  std::string dtype;        // compute dtype: fp32 (no autocast) | bf16 | fp16
  // Host BLAS kernels while it ran, as the device's Precision reads them back ("SkylakeX");
  // "" when the device reports none. The plain-LibTorch variants run the library's own.
  std::string blas;
  // What runs the variant's matmuls, for people: the host BLAS ("MKL", "OpenBLAS SkylakeX") or,
  // for a bf16 variant on a CPU LibTorch built with oneDNN, "oneDNN (bf16)"; "" on a device
  // with no host BLAS.
  std::string matmuls;
  bool loss_scaling = false;
  std::string optimizer;    // implementation, "torch::optim::AdamW" or the plugin's
  // How the step ran: "graph" (captured and replayed through Runtime::capture_step; the phases
  // below are then 0, a replay has none) or "eager: <why>".
  std::string step_mode;
  BenchStats time;
  // Medians of the step's phases (ms): zero_grad + forward + loss, backward, optimizer step.
  double forward_ms = 0;
  double backward_ms = 0;
  double optimizer_ms = 0;
  std::vector<double> check;  // accuracy check: loss per step (optimizer: parameter norm)
  // The device memory one step took above what was in use when it began (MemoryScope around
  // one untimed step after the warm-up); nullopt where the device reports no memory.
  std::optional<std::uint64_t> step_peak_bytes;
  // What step_peak_bytes leaves out (a captured step: its graph's private memory pool, held
  // since the recording, so a replay allocates next to nothing); empty otherwise.
  std::string step_peak_note;
  // Inference: outputs against the baseline's on the same inputs (none for the baseline).
  std::optional<double> rel_error;
  std::optional<double> cosine;
};

// Floors from measured machine rates: the fastest of several runs of each (the best the machine
// reached in this run, so a step can approach the floor but not beat it). Everything 0 when
// not measured.
struct BenchFloor {
  bool measured = false;
  double copy_gbps = 0;          // at::copy_ between large buffers, (read + written) bytes / s / 1e9
  // x.mul_(1) on one large buffer, same units: no read-for-ownership of a separate
  // destination, so nearer what an in-place optimizer can reach (a stricter reference).
  double inplace_gbps = 0;
  // Matmul rates are measured for fp32 and bf16 at the accelkit variant's settings (threads,
  // BLAS kernels); the floor uses the faster one.
  std::string matmul_dtype;      // dtype of the rate below: the faster of the two
  int matmul_n = 0;
  double matmul_tflops = 0;      // n^3 at::mm, 2 n^3 / s / 1e12
  std::string slower_matmul_dtype;  // the other one, for the record
  double slower_matmul_tflops = 0;
  int slower_matmul_n = 0;          // its n: matmul_n, or matmul_n / 4 when it was 3x slower there
  double step_flops = 0;         // matmul FLOPs per training step (0 for optimizer)
  double optimizer_bytes = 0;    // AdamW bytes per step: 28 per fp32 param
  double matmul_ms = 0;          // step_flops at the matmul rate
  double optimizer_ms = 0;       // optimizer_bytes at the copy bandwidth
  double optimizer_inplace_ms = 0;  // optimizer_bytes at the in-place bandwidth
  // floor_ms below = matmul_ms + the smaller of the two optimizer times.
  double floor_ms = 0;           // the sum
  double measured_over_floor = 0;  // accelkit median / floor (>= 1)
  double floor_over_measured = 0;  // floor / accelkit median (<= 1)
  std::string note;              // what the floor leaves out
  std::int64_t copy_bytes = 0;   // per buffer of the bandwidth runs
  int runs = 0;                  // timed runs per rate, each time the rates are measured
  std::string how;               // how the rates were measured ("the best of 7 runs before and 7 after ...")
  // Not empty: a step of the run was faster than the floor even after the rates were measured
  // again; the floor is then no lower bound and is not shown (the rates still are). Why.
  std::string left_out;
};

struct BenchAccuracy {
  std::string compared;   // "loss" | "parameters" | "outputs" (inference)
  int steps = 0;
  double tolerance = 0;
  double rel_diff = 0;    // accelkit vs baseline, max over the check steps
  std::optional<double> tuned_rel_diff;
  // Training in fp32: how far the baseline's own check values moved when its weights were each
  // moved by up to an ulp at random (the model's sensitivity to rounding alone).
  std::optional<double> rounding_spread;
  std::optional<double> cosine;  // inference: cosine similarity of accelkit's outputs to the baseline's
  bool ok = false;
  std::string why;        // why this tolerance
};

// Other work on the machine while the bench ran: cores other processes kept busy (/proc/stat
// less this process), before the run and while it timed. When they left fewer free cores than
// the variants use, the figures are suspect and `note` says so.
struct BenchMachine {
  int logical_cores = 0;
  int threads_used = 0;           // the most any variant uses
  double other_cores_before = -1;  // -1 = unknown
  double other_cores_during = -1;
  bool busy = false;
  std::string note;               // "" when quiet
  std::string waited;             // --wait-quiet: "" when it became quiet, else what was seen
};

// --data-ms: the input pipeline's part of the run.
struct BenchData {
  double producer_ms = 0;       // CPU work per batch asked for
  int prefetch = 0;             // the accelkit variant's prefetch depth (0: in the step, too)
  int block_steps = 0;          // steps per block (one timed sample = a block's mean step)
  // The accelkit variant's steps: median over blocks of the time they waited for their batch,
  // and of the producer's time per batch (on its thread), per step (ms).
  double accelkit_wait_ms = 0;
  double accelkit_produce_ms = 0;
};

struct BenchResult {
  std::string model;       // mlp | transformer | cnn | optimizer | the model file's path
  std::string mode = "train";  // train | infer
  std::string shape;       // "3 x Linear(2048), batch 256"
  std::string device;      // accelkit id, "cpu:0"
  std::string torch_device;
  std::string torch_version;
  int batch = 0;
  int width = 0;
  std::int64_t params = 0;
  int steps = 0;
  int warmup = 0;
  BenchVariant baseline;
  BenchVariant accelkit;
  std::optional<BenchVariant> tuned;
  std::optional<BenchVariant> eager;     // vs_eager: accelkit's settings, the step run eagerly
  std::optional<BenchVariant> int8;      // --quantize int8: Runtime::quantize's module
  std::optional<QuantizeReport> quantize;
  std::optional<double> speedup_int8;    // baseline median / int8 median
  double speedup = 0;                    // baseline median / accelkit median
  double speedup_min = 0;                // baseline min / accelkit min (best case on a shared machine)
  std::optional<double> speedup_vs_tuned;  // tuned median / accelkit median
  std::optional<double> speedup_vs_eager;  // eager median / accelkit median
  BenchFloor floor;
  std::optional<BenchData> data;  // --data-ms
  // Where the step peaks come from (the device's MemoryStats::source), or why there are none.
  std::string memory_source;
  BenchAccuracy accuracy;
  // With the `autotune` setting (profile auto): how the accelkit variant's settings were
  // chosen, on this model, before the check (mlp, transformer; the optimizer model has no loss).
  std::optional<TuneDecision> autotune;
  // The step tuner (step_tuning.hpp) as the accelkit variant was made: decided (by steps it
  // observed on a copy of the model, or from its cache), or off and why.
  std::optional<StepTuningStatus> step_tuning;
  std::optional<BatchDecision> batch_finder;  // --batch auto: the finder's decision (batch above is its batch)
  // Inference on a model file: what Runtime::optimize_for_inference chose for the accelkit
  // variant, with every candidate it timed.
  std::optional<InferenceDecision> inference;
  // What was asked for and does not apply to this model, each "what: why" (a .pt2 package:
  // --quantize, the tuned variant's freezing and channels-last); empty when everything ran.
  std::vector<std::string> not_timed;
  // BenchOptions::trace: the traced steps' summary, and which steps they were ("5 accelkit
  // steps after the timed ones").
  std::optional<TraceSummary> trace;
  std::string trace_steps;
  // What the runtime decided beside the settings (the auto-tuner's choice, a profile's request
  // the device cannot honour), as Context::decisions() held them when the run ended.
  std::vector<RuntimeDecision> decisions;
  BenchMachine machine;
  // On a new device type (PrivateUse1): the operators that ran on the CPU through the host's
  // fallback during the run, most calls first (new_device::fallback_counts).
  std::vector<std::pair<std::string, std::uint64_t>> fallbacks;
  double load_before = -1;  // 1-minute load average (-1 = unknown): other work on the machine
  double load_after = -1;
  std::string error;        // why the run stopped (BenchCheckError::partial()); empty when it ran
};

// The accuracy check failed: a loss is not finite, or accelkit's is out of tolerance.
class BenchCheckError : public std::runtime_error {
 public:
  BenchCheckError(const std::string& what, BenchResult partial)
      : std::runtime_error(what), partial_(std::move(partial)) {}
  // Everything known when the check failed (variants' check losses, accuracy; no timings).
  const BenchResult& partial() const noexcept { return partial_; }

 private:
  BenchResult partial_;
};

// The step time the bench's --batch auto allows on a CPU: its ~150 steps of up to three variants
// (step tuning, the check, warm-up and 20 timed rounds) end within minutes.
constexpr double kBenchBatchStepSeconds = 0.25;

struct BenchProgress {
  std::string model;
  std::string phase;  // "quiet" (--wait-quiet; done/total in seconds) | "batch" (--batch auto: trials) | "optimize" | "quantize" | "autotune" | "check" | "floors" | "warmup" | "timing"
  int done = 0;       // rounds done in this phase
  int total = 0;
  std::string detail;  // "batch": the trial that starts ("batch 2048") or ended ("batch 2048: 1.2 GiB, 340 ms")
};
using BenchProgressFn = std::function<void(const BenchProgress&)>;

// The mode `o` runs: "train" or "infer" (see BenchOptions::mode).
std::string bench_mode(const BenchOptions& o);

// Runs the benchmark on the runtime's device. Throws std::invalid_argument for bad options,
// BenchCheckError when the accuracy check fails.
BenchResult run_bench(Runtime& runtime, const BenchOptions& options,
                      const BenchProgressFn& progress = {});

// Random inputs of a model file as --input gives them ("32x3x224x224[,dtype]", one per argument
// of its forward) on the CPU, from the current generator. Throws std::invalid_argument naming
// the text that is not a shape.
std::vector<at::Tensor> example_inputs(const std::vector<std::string>& inputs);

// The result as JSON (one object; keys in a stable order): model, shape, device, ..., baseline,
// accelkit, tuned (with vs_tuned), speedup, speedup_vs_tuned, floor, accuracy, load.
std::string bench_json(const BenchResult& result, int indent = 2);

}  // namespace accelkit
