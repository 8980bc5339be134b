// The application API for training code: start accelkit once, then move the model, run
// forward under the negotiated autocast, scale the loss, and step the backend's optimizer.
//
//   auto rt = accelkit::Runtime::start({});          // plugins, settings, device, precision
//   rt->prepare(*model);                              // to the device
//   auto opt = rt->make_adamw(model->parameters(), {});
//   auto scaler = rt->make_loss_scaler();
//   accelkit::zero_grad(*opt.optimizer);              // each step: gradients to none
//   at::Tensor out;
//   { auto ac = rt->autocast(); out = model->forward(x); }   // loss outside: fp32
//   loss = criterion(out.to(at::kFloat), y);
//   scaler.scale(loss).backward();
//   scaler.step(*opt.optimizer);
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "accelkit/adamw_choice.hpp"
#include "accelkit/alignment.hpp"
#include "accelkit/autotune.hpp"
#include "accelkit/batch_finder.hpp"
#include "accelkit/guard.hpp"
#include "accelkit/context.hpp"
#include "accelkit/inference.hpp"
#include "accelkit/loss_scaler.hpp"
#include "accelkit/machine_load.hpp"
#include "accelkit/model_file.hpp"
#include "accelkit/prefetch.hpp"
#include "accelkit/quantize.hpp"
#include "accelkit/sdk/optimizer.hpp"
#include "accelkit/sdk/precision.hpp"
#include "accelkit/routing.hpp"
#include "accelkit/step_runner.hpp"
#include "accelkit/step_tuning.hpp"
#include "accelkit/sdk/torch_compat.hpp"

namespace torch::nn { class Module; }

namespace accelkit {

struct TuneSpace;  // autotune.cpp
namespace detail { class RegisteredKernels; }  // operator_kernels.hpp

// Runtime::autocast()'s scope: the calling thread's autocast as the step's configuration says,
// restored at the end of the scope. Counts the nesting, so that only a top-level scope is a
// training step to the step tuner.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType type, bool enabled, at::ScalarType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;
  // Runtime::autocast() scopes open on this thread.
  static int depth() noexcept;

 private:
  compat::AutocastGuard guard_;
};

struct OptimizerChoice {
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  std::string implementation;  // "fused AdamW (avx512, 2 threads)" or "torch::optim::AdamW"
  std::string why;             // why this one
  bool master_weights = false; // the params became bf16; the optimizer holds their fp32 master
};

class Runtime {
 public:
  // Resolves settings, loads plugins, negotiates (throws DeviceUnavailableError when nothing
  // fits), opens the device and applies its precision plan on the calling thread.
  static std::unique_ptr<Runtime> start(const ContextOptions& options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  Context& context() noexcept { return *context_; }
  const Context& context() const noexcept { return *context_; }
  const std::shared_ptr<Device>& device_handle() const noexcept { return device_; }
  c10::Device device() const noexcept { return torch_device_; }
  const PrecisionPlan& precision() const noexcept { return plan_; }
  // The plugin's operator kernels registered for the plan ("op: what"; PrecisionPlan::kernels).
  // They run on a thread whose applied plan lists them (apply_precision, and Runtime::start on
  // its thread), in the training steps whose configuration does (step tuning).
  std::vector<std::string> operator_kernels() const;
  // How far ahead accelkit::Prefetcher feeds this device (the prefetch setting) and where it
  // delivers: accelkit::prefetch_loader(*loader, rt->prefetch_options()).
  PrefetchOptions prefetch_options() const;

  // Moves the module's parameters and buffers to the device.
  void prepare(torch::nn::Module& module) const;
  void prepare(torch::jit::Module& module) const;

  // The user's TorchScript module made fast for inference here (inference.hpp): candidates
  // timed on `example_inputs` and checked against the module's own fp32 outputs; the fastest
  // within tolerance is returned, its decision() saying what was applied and why. Cached.
  std::unique_ptr<OptimizedModule> optimize_for_inference(const torch::jit::Module& module,
                                                          const std::vector<at::Tensor>& example_inputs,
                                                          const InferenceOptions& options = {});

  // The module's Linear layers in INT8 (quantize.hpp), on the quantized engine the device's
  // plugin names (Capability::int8_linear; std::invalid_argument where it has none). A frozen
  // copy is returned with a report: layers converted and kept (why), sizes, and - given
  // example inputs - the output error against the module's own fp32 outputs. Lossy by design:
  // the report says how much; nothing is chosen for the caller.
  QuantizedModule quantize(const torch::jit::Module& module, const QuantizeOptions& options = {},
                           const std::vector<at::Tensor>& example_inputs = {}) const;

  // The module's Linear, convolution and embedding sizes that are not multiples of what this
  // device's fast paths work in (alignment.hpp), for `dtype` ("" = the plan's dtype); with
  // `measure` (on the CPU), each misaligned Linear's GEMM timed as it is and padded, and with
  // `example_inputs` each misaligned convolution on the input shape it sees in their forward.
  AlignmentReport check_alignment(const torch::jit::Module& module, const std::string& dtype = "",
                                  bool measure = false, const std::vector<at::Tensor>& example_inputs = {}) const;

  // Autocast with the negotiated dtype for this scope (off when the plan says fp32). With
  // step tuning (step_tuning.hpp; the step_tuning setting, on by default), each top-level scope
  // entered with gradients on is one training step: the program's first steps run the
  // candidates in turn (the plan, fp32, fewer CPU threads), then the fastest is kept, recorded
  // in Context::decisions() and cached. One scope per training step is what it times: the
  // forward (the loss may be inside or out), as in the example above.
  AutocastScope autocast() const {
    const StepConfig c = step_config();
    return AutocastScope(torch_device_.type(), c.autocast, c.autocast ? c.dtype : autocast_dtype());
  }
  // Where step tuning stands: off (why), observing, or decided (what, from where, why).
  const StepTuningStatus& step_tuning() const noexcept { return step_tuning_status_; }
  at::ScalarType autocast_dtype() const;

  // The plugin's fused AdamW when it has one and fused_optimizer is auto/on; torch::optim::AdamW
  // when off or when the plugin has none (fused_optimizer=on then throws: never a silent swap).
  //
  // master_weights = on (or config.master_weights), or auto (the default) where `forwards` is
  // ForwardOwner::accelkit, with a bf16 autocast plan and a fused AdamW that has
  // Capability::master_weights: the optimizer converts the fp32 matrix `params` to
  // bf16 in place (biases and norm scales stay fp32) and keeps their fp32 master copy
  // (optimizer.hpp), so forward and backward run on bf16 weights without per-step casts; save
  // the optimizer with the model to keep the master. Every forward of the model - training and
  // evaluation - then runs under autocast() (outside it the bf16 weights meet fp32 inputs and
  // LibTorch refuses); `why` says so, a warning says it once, Context::decisions() records it.
  // Where that cannot be, auto and an "on" from a profile are skipped with the reason in `why`
  // and any other "on" throws. model_weights = false (tensors that no forward runs on under
  // autocast(), e.g. a bare optimizer benchmark) leaves the params as they are.
  OptimizerChoice make_adamw(const std::vector<at::Tensor>& params, const AdamWConfig& config,
                             bool model_weights = true, ForwardOwner forwards = ForwardOwner::program) const;

  // SGD (torch::optim::SGD's options and state, so checkpoints move both ways): the plugin's
  // fused SGD (Capability::fused_sgd) when fused_optimizer is auto/on, else torch::optim::SGD
  // with the reason in `why`; fused_optimizer = on where the device has none throws.
  OptimizerChoice make_sgd(const std::vector<at::Tensor>& params, const SGDConfig& config) const;

  // Which of the plugin's AdamW implementations make_adamw creates (adamw_choice.hpp): measured
  // on the first call that needs it (or read from the cache), then kept. nullopt before that,
  // and when the plugin has no optimizer.
  const std::optional<AdamWImplChoice>& adamw_choice() const noexcept { return adamw_choice_; }

  // The user's model file for inference on this runtime's device (model_file.hpp): TorchScript,
  // or a .pt2 package (LibTorch >= 2.6) compiled for this device type. Run it under
  // autocast() for the negotiated precision. Throws ModelFileError saying why it cannot.
  std::unique_ptr<InferenceModel> load_model(const std::string& path, const std::string& model_name = "") const {
    return load_model_file(path, torch_device_, model_name);
  }

  // Dynamic loss scaling when the plan asks for it (fp16), otherwise a pass-through scaler.
  LossScaler make_loss_scaler() const;

  // Where an operation class runs (routing.hpp): the device, or where a plugin rule or the
  // config's [routing] table sends it, with the reason.
  c10::Device device_for(OpClass op) const { return route(op).device; }
  const Route& route(OpClass op) const { return route_for(routes_, op); }
  const std::vector<Route>& routes() const noexcept { return routes_; }

  // The auto-tuner (autotune.hpp): with the `autotune` setting on (profile auto), the cached
  // decision for this device + model + versions, or trials timed now; the chosen precision,
  // optimizer and threads then become what this runtime runs with, recorded beside the
  // settings (Context::decisions(); the settings stay as resolved). With `autotune` off it
  // tunes nothing and returns the current choices with origin "settings". Settings the user
  // fixed (config file, environment, command line) are never overridden.
  TuneDecision autotune(const TuneProblem& problem, const TuneOptions& options = {});
  // The batch-size finder (batch_finder.hpp): the largest batch this device trains `problem`
  // with inside the memory budget, and the accumulation steps for a target effective batch.
  // Throws BatchDoesNotFitError when not even options.min fits.
  BatchDecision find_batch_size(const BatchProblem& problem, const BatchSearchOptions& options = {});
  // The thermal and power guard for this runtime's device (guard.hpp), as the guard_* settings
  // say; off, with the reason in describe(), when guard_interval is 0, the sampler setting is
  // off or the device has no monitor. `on_event` gets every event on the thread that checks.
  std::unique_ptr<Guard> guard(std::function<void(const GuardEvent&)> on_event = {}) const;
  // The last autotune() decision, if any.
  const std::optional<TuneDecision>& tune_decision() const noexcept { return tune_; }

  // The training step `step` (forward, backward, optimizer->step() on static tensors) run as
  // the `compile` setting and the device allow: graph-captured and replayed, or eager with the
  // reason (step_runner.hpp has the rules and what the step may do). Throws
  // DeviceUnavailableError for an explicit compile = graph this device cannot honour.
  std::unique_ptr<StepRunner> capture_step(torch::optim::Optimizer& optimizer, std::function<void()> step,
                                           int warmup = 3);

  // Applies another plan through the device's Precision (threads, TF32, host BLAS kernels,
  // the calling thread's autocast) for work that is not accelkit's own, e.g. the bench's
  // plain-LibTorch variants; apply_precision(precision()) puts the negotiated one back.
  // Throws std::runtime_error when the device refuses the plan.
  void apply_precision(const PrecisionPlan& plan);

  // Called by dist::init for a run of several processes: on a CPU, the host's physical cores
  // shared between its `local_ranks` ranks unless `threads` is set (recorded as the "threads"
  // decision); step tuning observes again at those threads and the ranks decide together
  // through `agreement` (step_tuning.hpp; without one it is off: every rank must run one
  // configuration).
  void join_data_parallel(int local_ranks, StepAgreement agreement = {});

 private:
  Runtime() = default;
  // Whose operator kernels the plan's steps run (step tuning).
  StepKernels plan_kernels() const noexcept { return plan_.kernels.empty() ? StepKernels::none : StepKernels::plugin; }
  OptimizerChoice make_sgd_as(const std::vector<at::Tensor>& params, const SGDConfig& config, Toggle fused) const;
  OptimizerChoice make_adamw_as(const std::vector<at::Tensor>& params, const AdamWConfig& config, Toggle fused,
                                bool model_weights = true, ForwardOwner forwards = ForwardOwner::program) const;
  // Whether the settings ask for master weights for a model whose forwards `forwards` runs.
  bool master_weights_asked(ForwardOwner forwards) const;
  // Whether make_adamw_as gives the optimizer master weights; auto or a profile's "on" that
  // cannot be honoured returns false with the reason in `note`, any other "on" throws.
  bool use_master_weights(const AdamWConfig& config, Toggle fused, bool model_weights, ForwardOwner forwards,
                          std::string& note) const;
  void apply_plan(const PrecisionRequest& request);
  void register_kernels(const PrecisionPlan& plan);
  // The precision request this runtime runs with: the settings', with what it decided since.
  PrecisionRequest settings_request() const;
  // Records a decision beside the settings (Context::record) and logs it.
  void decide(const char* key, std::string value, std::string source, std::string why);
  // What the runtime runs with where it may decide otherwise than the settings: a profile's
  // request the device cannot honour, the auto-tuner's choice. Starts as the settings.
  struct Choices {
    std::optional<Dtype> precision;
    Toggle tf32 = Toggle::automatic;
    Toggle fused_optimizer = Toggle::automatic;
    int threads = 0;
  };
  Choices current_;
  void apply_sdpa_backend();
  // The plan's autocast, for accelkit's own trials (no step tuning).
  AutocastScope plan_autocast() const { return AutocastScope(torch_device_.type(), plan_.autocast, autocast_dtype()); }
  // Step tuning (step_tuning.cpp).
  void setup_step_tuning();
  void make_step_tuner(const std::vector<StepConfig>& candidates) const;  // with the agreement, if any
  StepConfig step_config() const;  // this autocast() scope's configuration
  void apply_step_config(const StepConfig& c) const;  // threads and the thread's autocast
  void no_step_tuning(const std::string& why) const;  // unless already decided
  void step_tuning_off(std::string why) const;         // whatever its state
  void agree_on_steps(StepAgreement agreement);        // join_data_parallel's parts
  void agree_on_adamw(AdamWImplChoice& choice) const;  // rank 0's, in a data-parallel run
  void share_cores(int local_ranks);
  void drop_unweighted_candidates(const std::string& why) const;
  std::string step_cache_path(std::string& key) const;
  void read_step_cache() const;
  void write_step_cache() const;
  void note_model(const std::vector<at::Tensor>& params, const char* optimizer) const;
  mutable std::unique_ptr<StepTuner> step_tuner_;
  mutable StepTuningStatus step_tuning_status_;
  StepAgreement step_agreement_;        // a data-parallel run's (join_data_parallel)
  mutable int step_generation_ = 0;     // tuners made under it
  mutable std::string model_signature_;  // the params of the last optimizer made here
  mutable StepConfig current_step_;      // what the open top-level scope runs with
  mutable std::optional<CpuSample> step_load_start_;  // the machine's load when observing began
  // autotune()'s steps (autotune.cpp).
  TuneSpace tune_space(bool sgd) const;
  void run_trial(const TuneProblem& problem, const TuneOptions& options, const at::Tensor& target, TuneTrial& trial);
  void adopt_tuning(const TuneDecision& decision, const TuneSpace& space, const std::string& source);
  std::unique_ptr<Context> context_;
  std::shared_ptr<Device> device_;
  std::shared_ptr<Precision> precision_rules_;
  std::optional<TuneDecision> tune_;
  // While the auto-tuner's trials run: what a trial's optimizer does to the model (master
  // weights) is neither recorded as a decision nor warned about - the chosen candidate's is.
  bool in_trial_ = false;
  // The device's optimizers and what other plugins contribute to it (Plugin::optimizer_for).
  void attach_optimizers();
  std::shared_ptr<Optimizer> optimizers_;  // null when no plugin has one for the device
  std::string optimizer_absent_reason_;
  mutable std::optional<AdamWImplChoice> adamw_choice_;
  c10::Device torch_device_{c10::kCPU};
  std::vector<Route> routes_;
  PrecisionPlan plan_;
  // The plugin's operator kernels in LibTorch's dispatcher (apply_plan). Last: destroyed first,
  // while the plugin that holds their code is still loaded.
  std::unique_ptr<detail::RegisteredKernels> kernels_;
};

// Sets every gradient of `optimizer`'s parameters to none (undefined), PyTorch 2.x's default
// for zero_grad(): the next backward stores its fresh gradient instead of adding it into a
// zeroed buffer, saving a memset and an accumulate pass over every gradient. LibTorch 1.13's
// Optimizer::zero_grad() only zeroes. Code that reads a gradient before backward sees none.
void zero_grad(torch::optim::Optimizer& optimizer);

// Gradient accumulation over N micro-batches: scale each loss by 1/N, step on every N-th.
class GradAccumulator {
 public:
  explicit GradAccumulator(int micro_batches);
  int micro_batches() const noexcept { return n_; }
  at::Tensor scale(const at::Tensor& loss) const;
  // Call after each micro-batch's backward: true when the optimizer should step now.
  bool boundary() noexcept { return ++count_ % n_ == 0; }

 private:
  int n_;
  long count_ = 0;
};

}  // namespace accelkit
