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
#include "accelkit/context.hpp"
#include "accelkit/loss_scaler.hpp"
#include "accelkit/routing.hpp"
#include "accelkit/sdk/optimizer.hpp"
#include "accelkit/sdk/precision.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "accelkit/step_tuning.hpp"

namespace torch::nn { class Module; }

namespace accelkit {

class StepCapture;       // step_capture.hpp
struct PrefetchOptions;  // prefetch.hpp
namespace detail {
class AdoptedOptimizer;   // adopted_optimizer.hpp
class AdoptedOptimizers;
class AutoTuner;          // autotune_control.hpp
class RegisteredKernels;  // kernel_registry.hpp
class StepTuning;         // step_tuning_control.hpp
struct RuntimeInternals;  // internals.hpp
}  // namespace detail

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

// What Runtime::prepare(module, optimizer) made of the program's own optimizer.
struct Adoption {
  std::string optimizer;       // "torch::optim::Adam", "a subclass of torch::optim::SGD (MySGD)"
  std::string implementation;  // "fused AdamW (avx512, 2 threads) on the optimizer's own state", or
                               // "torch::optim::RMSprop, as it is"
  std::string why;             // why this one
  bool fused = false;          // Runtime::step runs the device's fused update
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

  // Moves the module's parameters and buffers to the device. The module's parameters name the
  // model in step tuning's cache key, whichever optimizer the program keeps.
  void prepare(torch::nn::Module& module) const;
  void prepare(torch::jit::Module& module) const;
  // The same, and takes the program's own optimizer as it is: a torch::optim::Adam, AdamW or SGD
  // (param groups, options, state) is stepped by Runtime::step with the device's fused
  // implementation of the same update where it has one and fused_optimizer allows - on the
  // optimizer's own options (a learning-rate schedule that sets them works) and state (torch::save
  // and torch::load of the optimizer move checkpoints both ways with torch::optim). Any other
  // optimizer (RMSprop, Adagrad, LBFGS, a subclass) steps as it is, with the reason. Logged and
  // recorded in Context::decisions() ("optimizer"). The optimizer must outlive the runtime's use.
  Adoption prepare(torch::nn::Module& module, torch::optim::Optimizer& optimizer);
  // One step of `optimizer` (call it instead of optimizer.step()): as prepare() arranged; an
  // optimizer not given to prepare() is taken on its first step. A schedule that sets an option
  // the fused step cannot follow (amsgrad switched mid-run) throws std::invalid_argument.
  at::Tensor step(torch::optim::Optimizer& optimizer, const std::function<at::Tensor()>& closure = nullptr);

  // Autocast with the negotiated dtype for this scope (off when the plan says fp32). With
  // step tuning (step_tuning.hpp; the step_tuning setting, on by default), each top-level scope
  // entered with gradients on is one training step: the program's first steps run the
  // candidates in turn (the plan, fp32, fewer CPU threads), then the fastest is kept, recorded
  // in Context::decisions() and cached. One scope per training step is what it times: the
  // forward (the loss may be inside or out), as in the example above.
  AutocastScope autocast() const;
  // Where step tuning stands: off (why), observing, or decided (what, from where, why).
  const StepTuningStatus& step_tuning() const noexcept;
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

  // Dynamic loss scaling when the plan asks for it (fp16), otherwise a pass-through scaler.
  LossScaler make_loss_scaler() const;

  // Where an operation class runs (routing.hpp): the device (route(op).device), or where a
  // plugin rule or the config's [routing] table sends it, with the reason.
  const Route& route(OpClass op) const { return route_for(routes_, op); }
  const std::vector<Route>& routes() const noexcept { return routes_; }

  // The training step `step` (forward, backward, optimizer->step() on static tensors) run as
  // the `compile` setting and the device allow: graph-captured and replayed, or eager with the
  // reason (step_capture.hpp has the rules and what the step may do). Throws
  // DeviceUnavailableError for an explicit compile = graph this device cannot honour.
  std::unique_ptr<StepCapture> capture_step(torch::optim::Optimizer& optimizer, std::function<void()> step,
                                           int warmup = 3);

  // Applies another plan through the device's Precision (threads, TF32, host BLAS kernels,
  // the calling thread's autocast) for work that is not accelkit's own, e.g. the bench's
  // plain-LibTorch variants; apply_precision(precision()) puts the negotiated one back.
  // Throws std::runtime_error when the device refuses the plan.
  void apply_precision(const PrecisionPlan& plan);

 private:
  friend struct detail::RuntimeInternals;  // for the subsystems built on the runtime (internals.hpp)
  // The auto-tuner (accelkit::autotune) changes what the runtime runs with: its choices, its plan.
  friend class detail::AutoTuner;
  Runtime() = default;
  OptimizerChoice make_sgd_as(const std::vector<at::Tensor>& params, const SGDConfig& config, Toggle fused) const;
  OptimizerChoice make_adamw_as(const std::vector<at::Tensor>& params, const AdamWConfig& config, Toggle fused,
                                bool model_weights = true, ForwardOwner forwards = ForwardOwner::program) const;
  // make_adamw_as's plugin part: the fused AdamW `c` asks for, created; nullopt (with a warning)
  // where the plugin could not create it and torch::optim::AdamW may stand in, else it throws.
  std::optional<OptimizerChoice> make_fused_adamw(const std::vector<at::Tensor>& params, const AdamWConfig& config,
                                                  AdamWConfig& c, Toggle fused, ForwardOwner forwards,
                                                  std::string& master_note) const;
  // Which of the plugin's AdamW implementations `c` creates: the one adamw_implementation
  // names, or (without master weights) the measured fastest, rank 0's in a data-parallel run.
  // Sets c.implementation where it chooses; returns the description, `chosen_why` the reason.
  std::string choose_fused_adamw(AdamWConfig& c, std::string& chosen_why) const;
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
  // malloc_reuse: glibc's malloc keeps freed memory for the next step (malloc_reuse.hpp).
  void reuse_freed_memory();
  // The plan's autocast, for accelkit's own trials (no step tuning).
  AutocastScope plan_autocast() const { return AutocastScope(torch_device_.type(), plan_.autocast, autocast_dtype()); }
  std::unique_ptr<Context> context_;
  std::shared_ptr<Device> device_;
  std::shared_ptr<Precision> precision_rules_;
  // Step tuning: the candidates, each autocast() scope's configuration, the decision.
  std::unique_ptr<detail::StepTuning> steps_;
  // The auto-tuner's trials and its last decision.
  std::unique_ptr<detail::AutoTuner> tuner_;
  // The program's own optimizers (prepare(module, optimizer), step()).
  std::unique_ptr<detail::AdoptedOptimizers> adopted_;
  // Takes `optimizer` (again, where an earlier one lived at its address), logged and recorded.
  detail::AdoptedOptimizer& adopt(torch::optim::Optimizer& optimizer);
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

// How far ahead accelkit::Prefetcher feeds `rt`'s device (the prefetch setting) and where it
// delivers: accelkit::prefetch_loader(*loader, accelkit::prefetch_options(*rt)) (prefetch.hpp).
PrefetchOptions prefetch_options(const Runtime& rt);

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
