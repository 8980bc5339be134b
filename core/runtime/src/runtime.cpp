#include "plugin_call.hpp"
#include "accelkit/runtime.hpp"

#include "accelkit/sdk/support/adamw_state.hpp"

#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/version.h>

#include "accelkit/sdk/device.hpp"
#include "accelkit/new_device.hpp"
#include "accelkit/prefetch.hpp"
#include "adopted_optimizer.hpp"
#include "tuning/autotune_control.hpp"
#include "combined_optimizer.hpp"
#include "kernel_registry.hpp"
#include "tuning/step_tuning_control.hpp"

namespace accelkit {

std::unique_ptr<Runtime> Runtime::start(const ContextOptions& options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->steps_ = std::make_unique<detail::StepTuning>(*rt);
  rt->tuner_ = std::make_unique<detail::AutoTuner>(*rt);
  rt->context_ = Context::create(options);
  rt->device_ = rt->context_->open_selected();
  const DeviceInfo& info = rt->device_->info();
  // A device type LibTorch does not know: the core registers it (PrivateUse1) first.
  rt->torch_device_ = c10::Device(new_device::declares(info)
                                      ? new_device::activate(rt->context_->require_device().plugin, *rt->device_)
                                      : info.torch_device);
  rt->routes_ = routes_for(info, rt->context_->settings());

  const Config& c = rt->context_->config();
  rt->reuse_freed_memory();
  rt->current_ = {*c.precision, *c.tf32, *c.fused_optimizer, *c.threads};
  // A profile asks for everything; what the device lacks is skipped with a reason, recorded
  // beside the settings (a value the user set is honoured or fails loudly).
  auto skip_profile_on = [&](const char* key, const Setting<Toggle>& s, Toggle& current, bool supported,
                             const std::string& why_not) {
    if (s.origin != Origin::profile || *s != Toggle::on || supported) return;
    current = Toggle::automatic;
    rt->decide(key, "auto", info.id, s.from() + " asks " + key + " = on; skipped: " + why_not);
  };
  skip_profile_on("tf32", c.tf32, rt->current_.tf32, info.capabilities.has(Capability::tf32), info.id + " has no TF32");
  auto precision = rt->device_->precision();
  if (!precision.ok()) throw std::runtime_error(info.id + ": no precision rules: " + precision.status().message());
  rt->precision_rules_ = precision.value();
  rt->apply_plan(rt->settings_request());
  rt->apply_sdpa_backend();

  rt->attach_optimizers();
  skip_profile_on("fused_optimizer", c.fused_optimizer, rt->current_.fused_optimizer, rt->optimizers_ != nullptr,
                  info.id + " has no fused optimizer (" + rt->optimizer_absent_reason_ + ")");
  rt->steps_->setup();
  return rt;
}

Runtime::~Runtime() = default;

std::vector<std::string> Runtime::operator_kernels() const {
  return kernels_ ? kernels_->registered() : std::vector<std::string>{};
}

void Runtime::decide(const char* key, std::string value, std::string source, std::string why) {
  spdlog::info("{} = {} ({}): {}", key, value, source, why);
  context_->record({key, std::move(value), std::move(source), std::move(why)});
}

void Runtime::attach_optimizers() {
  const DeviceInfo& info = device_->info();
  auto own = device_->optimizer();
  if (own.ok() && own.value()) {
    optimizers_ = own.value();
  } else {
    optimizer_absent_reason_ = own.ok() ? "the plugin returned none" : own.status().message();
  }
  // Other plugins' AdamW implementations for this device (Plugin::optimizer_for).
  std::vector<std::string> declined;
  auto contributed = collect_optimizer_contributions(context_->discovery(), context_->require_device().plugin, info,
                                                     &declined);
  for (const auto& line : declined) spdlog::warn("{}", line);
  for (const auto& c : contributed)
    spdlog::info("optimizer: plugin {} contributes AdamW to {}: {}", c.plugin, info.id,
                 call_plugin(c.plugin + " plugin", "Optimizer::implementation()", [&] { return c.optimizer->implementation(); }));
  if (!contributed.empty()) optimizers_ = combine_optimizers(optimizers_, std::move(contributed));
}

PrecisionRequest Runtime::settings_request() const {
  PrecisionRequest r = precision_request_from(context_->config());
  r.precision = current_.precision;
  r.tf32 = current_.tf32;
  r.threads = current_.threads;
  return r;
}

void Runtime::apply_precision(const PrecisionPlan& plan) {
  if (Status st = precision_rules_->apply(plan); !st.is_ok())
    throw std::runtime_error(device_->info().id + ": applying a precision plan failed: " + st.message());
  detail::set_operator_kernels_open(!plan.kernels.empty());
}

void Runtime::register_kernels(const PrecisionPlan& plan) {
  if (plan.kernels.empty()) return;
  const std::string& id = device_->info().id;
  c10::DispatchKey key = c10::DispatchKey::CPU;
  if (torch_device_.is_cuda()) key = c10::DispatchKey::CUDA;
  else if (!torch_device_.is_cpu())
    throw std::runtime_error(id + ": its precision plan lists operator kernels, which the host registers for CPU and "
                                  "CUDA devices only (a new device type brings its kernels in DeviceRuntime)");
  if (!kernels_) kernels_ = std::make_unique<detail::RegisteredKernels>();
  kernels_->add(plan.kernels, precision_rules_->kernels(), key, context_->require_device().plugin);
}

void Runtime::apply_plan(const PrecisionRequest& request) {
  const Config& c = context_->config();
  const std::string& id = device_->info().id;
  auto plan = precision_rules_->plan(request);
  if (!plan.ok())
    throw DeviceUnavailableError(std::string("precision '") + precision_name(request.precision) + "' (from " +
                                 c.precision.from() + "), tf32 '" + to_string(request.tf32) + "' on " + id + ": " +
                                 plan.status().message());
  register_kernels(plan.value());
  apply_precision(plan.value());
  plan_ = plan.value();
}

// sdpa_backend other than auto: exactly that backend, or a loud failure (never a silent
// fallback to another kernel).
void Runtime::apply_sdpa_backend() {
  const Setting<SdpaBackend>& want = context_->config().sdpa_backend;
  if (*want == SdpaBackend::automatic) return;
  const DeviceInfo& info = device_->info();
  const std::string asked = std::string("sdpa_backend = ") + to_string(*want) + " (from " + want.from() + ")";
  if (!compat::kSdpaControllable)
    throw DeviceUnavailableError(asked + ": LibTorch " + TORCH_VERSION +
                                 " has no scaled-dot-product attention controls (they exist from 2.0)");
  if (*want == SdpaBackend::flash && !info.capabilities.has(Capability::sdpa_flash))
    throw DeviceUnavailableError(asked + ": " + info.id + " has no flash attention");
  if (*want == SdpaBackend::mem_efficient && !info.capabilities.has(Capability::sdpa_mem_efficient))
    throw DeviceUnavailableError(asked + ": " + info.id + " has no memory-efficient attention");
  compat::SdpaBackends b;
  b.flash = *want == SdpaBackend::flash;
  b.mem_efficient = *want == SdpaBackend::mem_efficient;
  b.math = *want == SdpaBackend::math;
  compat::set_sdpa_backends(b);
}

at::ScalarType Runtime::autocast_dtype() const {
  switch (plan_.dtype) {
    case Dtype::bf16: return at::kBFloat16;
    case Dtype::fp16: return at::kHalf;
    case Dtype::fp32: return at::kFloat;
  }
  return at::kFloat;
}

AutocastScope Runtime::autocast() const {
  const StepConfig c = steps_->config();
  return AutocastScope(torch_device_.type(), c.autocast, c.autocast ? c.dtype : autocast_dtype());
}

const StepTuningStatus& Runtime::step_tuning() const noexcept { return steps_->status(); }

void Runtime::prepare(torch::nn::Module& module) const {
  module.to(torch_device_);
  steps_->note_module(module);
  steps_->note_model(module.parameters(), "model");
}
void Runtime::prepare(torch::jit::Module& module) const { module.to(torch_device_); }

PrefetchOptions prefetch_options(const Runtime& rt) {
  return PrefetchOptions{static_cast<std::size_t>(*rt.context().config().prefetch), rt.device()};
}

OptimizerChoice Runtime::make_adamw(const std::vector<at::Tensor>& params, const AdamWConfig& c, bool model_weights,
                                    ForwardOwner forwards) const {
  return make_adamw_as(params, c, current_.fused_optimizer, model_weights, forwards);
}

namespace {
// What a program whose weights make_adamw turned bf16 must do from then on.
constexpr const char* kMasterWeightsUse =
    "the model's matrix weights are bf16 now (their fp32 master is in the optimizer): run every forward of it - "
    "training and evaluation - under rt->autocast(); outside it a forward fails on the dtype mismatch";
constexpr const char* kMasterWeightsOwned =
    "the model's matrix weights are bf16 (their fp32 master is in the optimizer); accelkit's loop runs every forward "
    "of it under autocast";

// Who asked for master weights, for messages: "AdamWConfig::master_weights", or
// "master_weights = auto (from built-in<extra>)".
std::string master_weights_asker(const AdamWConfig& c, const Setting<Toggle>& s, const std::string& extra = "") {
  if (c.master_weights) return "AdamWConfig::master_weights";
  return "master_weights = " + std::string(to_string(*s)) + " (from " + s.from() + extra + ")";
}

// Whether master weights that cannot be had are done without (auto, a profile's "on") rather
// than an error (AdamWConfig::master_weights, a user's "on").
bool master_weights_optional(const AdamWConfig& c, const Setting<Toggle>& s) {
  return !c.master_weights && (*s == Toggle::automatic || s.origin == Origin::profile);
}

// Where fused_optimizer came from: the settings, or the auto-tuner's decision.
std::string fused_origin(const Config& s, Toggle fused) {
  return fused == *s.fused_optimizer ? s.fused_optimizer.from() : "the auto-tuner";
}
}  // namespace

bool Runtime::master_weights_asked(ForwardOwner forwards) const {
  const Toggle t = *context_->config().master_weights;
  return t == Toggle::on || (t == Toggle::automatic && forwards == ForwardOwner::accelkit);
}

bool Runtime::use_master_weights(const AdamWConfig& c, Toggle fused, bool model_weights, ForwardOwner forwards,
                                 std::string& note) const {
  const Setting<Toggle>& setting = context_->config().master_weights;
  const bool from_config = c.master_weights;
  if (!from_config && (!master_weights_asked(forwards) || !model_weights)) return false;
  const std::string asked =
      master_weights_asker(c, setting, *setting == Toggle::automatic ? "; accelkit runs every forward" : "");
  const DeviceInfo& info = device_->info();
  std::string why_not;
  if (!plan_.autocast || plan_.dtype != Dtype::bf16)
    why_not = std::string("the precision plan is ") + to_string(plan_.dtype) + ", not bf16 autocast";
  else if (fused == Toggle::off)
    why_not = "fused_optimizer = off";
  else if (!optimizers_ || !info.capabilities.has(Capability::master_weights))
    why_not = info.id + "'s optimizer has no master weights";
  if (why_not.empty()) return true;
  if (!master_weights_optional(c, setting)) throw std::runtime_error(asked + " but " + why_not);
  note = "; " + asked + " skipped: " + why_not;
  return false;
}

std::string Runtime::choose_fused_adamw(AdamWConfig& c, std::string& chosen_why) const {
  const Config& s = context_->config();
  const std::string& asked = *s.adamw_implementation;
  // Among several implementations the measured fastest; master weights only the plugin's
  // default (the first) keeps.
  const std::string who = context_->require_device().plugin + " plugin";
  std::string impl = call_plugin(who, "Optimizer::implementation()", [&] { return optimizers_->implementation(); });
  if (c.implementation.empty() && asked != "auto") {
    // A name the user gave: that one or a loud failure (the plugin lists what it offers).
    c.implementation = asked;
    chosen_why = "; adamw_implementation = " + asked + " (from " + s.adamw_implementation.from() + ")";
    for (const auto& i : call_plugin(who, "Optimizer::adamw_implementations()",
                                     [&] { return optimizers_->adamw_implementations(); }))
      if (i.name == asked) impl = i.description;
  } else if (c.implementation.empty() && !c.master_weights) {
    if (!adamw_choice_) {
      adamw_choice_ = choose_adamw_implementation(*context_, *optimizers_, torch_device_, *s.autotune_cache);
      if (adamw_choice_->origin != "only") steps_->agree_on_adamw(*adamw_choice_, *optimizers_);
    }
    if (adamw_choice_->origin != "only") {
      c.implementation = adamw_choice_->name;
      impl = adamw_choice_->description;
      chosen_why = "; " + adamw_choice_->name + ": " + adamw_choice_->why;
    }
  }
  return impl;
}

std::optional<OptimizerChoice> Runtime::make_fused_adamw(const std::vector<at::Tensor>& params,
                                                         const AdamWConfig& config, AdamWConfig& c, Toggle fused,
                                                         ForwardOwner forwards, std::string& master_note) const {
  const Config& s = context_->config();
  const std::string device_id = device_->info().id;
  const std::string fused_name = to_string(fused);
  std::string chosen_why;
  std::string impl = choose_fused_adamw(c, chosen_why);
  auto made = optimizers_->create_adamw(params, c);
  if (!(made.ok() && made.value()) && c.master_weights && master_weights_optional(config, s.master_weights)) {
    // The implementation chosen keeps no master (an add-on plugin's AdamW, say): auto and a
    // profile's "on" do without them, as where the plan cannot have them.
    master_note = "; " + master_weights_asker(config, s.master_weights) + " skipped: " + made.status().message();
    c.master_weights = false;
    made = optimizers_->create_adamw(params, c);
  }
  if (made.ok() && made.value()) {
    const char* master_use = forwards == ForwardOwner::program ? kMasterWeightsUse : kMasterWeightsOwned;
    if (c.master_weights) {
      impl += " with bf16 weights + fp32 master";
      // The program's model changed under it: say what keeps it usable, once, loudly (a
      // tuning trial's model is restored after it, and accelkit's own loops run every
      // forward under autocast: nothing to say).
      if (!in_trial_) {
        steps_->drop_unweighted_candidates("master weights: the weights are bf16, so every step runs under autocast");
        static std::once_flag told;
        if (forwards == ForwardOwner::program) std::call_once(told, [] { spdlog::warn("{}", kMasterWeightsUse); });
        context_->record({"master_weights", "on", device_id, master_use});
      }
    }
    return OptimizerChoice{made.value(), impl,
                           "fused_optimizer = " + fused_name + " and " + device_id + " has one" + chosen_why +
                               (c.master_weights ? "; " + master_weights_asker(config, s.master_weights) + "; " + master_use
                                                 : master_note),
                           c.master_weights};
  }
  if (c.master_weights)
    throw std::runtime_error(device_id + " could not create its fused AdamW with master weights: " +
                             made.status().message());
  const std::string& asked = *s.adamw_implementation;
  if (asked != "auto")
    throw std::runtime_error("adamw_implementation = " + asked + " (from " + s.adamw_implementation.from() +
                             ") but " + device_id + " could not create it: " + made.status().message());
  if (fused == Toggle::on)
    throw std::runtime_error("fused_optimizer = on (from " + fused_origin(s, fused) + ") but " + device_id +
                             " could not create it: " + made.status().message());
  spdlog::warn("{}: fused AdamW unavailable ({}); using torch::optim::AdamW", device_id, made.status().message());
  return std::nullopt;
}

OptimizerChoice Runtime::make_adamw_as(const std::vector<at::Tensor>& params, const AdamWConfig& config, Toggle fused,
                                       bool model_weights, ForwardOwner forwards) const {
  const Config& s = context_->config();
  const std::string device_id = device_->info().id;
  const std::string fused_from = fused_origin(s, fused);
  AdamWConfig c = config;
  std::string master_note;
  c.master_weights = use_master_weights(config, fused, model_weights, forwards, master_note);
  if (!in_trial_ && model_weights) steps_->note_model(params, "AdamW");
  if (fused != Toggle::off && optimizers_) {
    if (auto made = make_fused_adamw(params, config, c, fused, forwards, master_note)) return std::move(*made);
  } else if (fused == Toggle::on) {
    throw std::runtime_error("fused_optimizer = on (from " + fused_from + ") but " + device_id +
                             " has no fused optimizer: " + optimizer_absent_reason_);
  }
  // torch::optim::AdamW: fused_optimizer = off, or the device has none (or could not create it).
  const std::string& asked = *s.adamw_implementation;
  if (asked != "auto")
    throw std::runtime_error("adamw_implementation = " + asked + " (from " + s.adamw_implementation.from() + ") but " +
                             (fused == Toggle::off ? "fused_optimizer = off (from " + fused_from + ")"
                                                   : device_id + " has no fused optimizer: " + optimizer_absent_reason_));
  const auto options = support::adamw_options(c);
  if (c.maximize) throw std::invalid_argument("torch::optim::AdamW has no 'maximize' option in this LibTorch");
  auto opt = std::make_shared<torch::optim::AdamW>(params, options);
  std::string why = fused == Toggle::off ? "fused_optimizer = off (from " + fused_from + ")"
                                         : device_id + " has no fused optimizer: " + optimizer_absent_reason_;
  return {opt, "torch::optim::AdamW", why + master_note};
}

OptimizerChoice Runtime::make_sgd(const std::vector<at::Tensor>& params, const SGDConfig& c) const {
  return make_sgd_as(params, c, current_.fused_optimizer);
}

OptimizerChoice Runtime::make_sgd_as(const std::vector<at::Tensor>& params, const SGDConfig& c, Toggle fused) const {
  // torch::optim::SGD's own rule, before any implementation is chosen: never a fallback over it.
  if (c.nesterov && (c.momentum <= 0 || c.dampening != 0))
    throw std::invalid_argument("SGD: Nesterov momentum needs momentum > 0 and dampening 0");
  if (!in_trial_) steps_->note_model(params, "SGD");
  const Config& s = context_->config();
  const std::string device_id = device_->info().id;
  const std::string fused_from = fused_origin(s, fused);
  const std::string fused_name = to_string(fused);
  std::string why_not;
  if (fused == Toggle::off) {
    why_not = "fused_optimizer = off (from " + fused_from + ")";
  } else if (!optimizers_) {
    why_not = device_id + " has no fused optimizer: " + optimizer_absent_reason_;
  } else {
    const std::string who = context_->require_device().plugin + " plugin";
    auto made = call_plugin(who, "Optimizer::create_sgd()", [&] { return optimizers_->create_sgd(params, c); });
    if (made.ok() && made.value()) {
      // The contract promises torch::optim::SGD's state: its checkpoints load into the object.
      if (dynamic_cast<const torch::optim::SGD*>(made.value().get()) == nullptr)
        throw std::runtime_error(who + "'s create_sgd returned an optimizer that is not a torch::optim::SGD");
      return {made.value(), "fused SGD (" + who + ", " + device_id + ")",
              "fused_optimizer = " + fused_name + " and " + device_id + " has a fused SGD", false};
    }
    why_not = device_id + " has no fused SGD: " + (made.ok() ? std::string("its plugin returned none") : made.status().message());
  }
  if (fused == Toggle::on) throw std::runtime_error("fused_optimizer = on (from " + fused_from + ") but " + why_not);
  auto opt = std::make_shared<torch::optim::SGD>(
      params, torch::optim::SGDOptions(c.lr).momentum(c.momentum).dampening(c.dampening).weight_decay(c.weight_decay).nesterov(
                  c.nesterov));
  return {opt, "torch::optim::SGD", why_not};
}

LossScaler Runtime::make_loss_scaler() const {
  LossScalerOptions o;
  o.enabled = plan_.loss_scaling;
  return LossScaler(o);
}

void zero_grad(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params()) p.mutable_grad().reset();
}

GradAccumulator::GradAccumulator(int micro_batches) : n_(micro_batches) {
  if (n_ < 1) throw std::invalid_argument("gradient accumulation needs at least 1 micro-batch");
}

at::Tensor GradAccumulator::scale(const at::Tensor& loss) const { return n_ == 1 ? loss : loss / n_; }

}  // namespace accelkit
