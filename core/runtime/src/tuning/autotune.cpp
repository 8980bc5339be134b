// The auto-tuner: candidates, trials on the caller's model, the choice, the cache.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/version.h>

#include "accelkit/sdk/device.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/machine_load.hpp"
#include "accelkit/version.hpp"
#include "accelkit/decision_cache.hpp"
#include "autotune_control.hpp"
#include "autotune_entry.hpp"
#include "accelkit/runtime/model_snapshot.hpp"
#include "accelkit/device_sync.hpp"
#include "accelkit/base/median.hpp"
#include "kernel_registry.hpp"
#include "step_tuning_control.hpp"
#include "accelkit/base/strings.hpp"

namespace accelkit {

using decision_cache::hash_hex;

std::string TuneCandidate::label() const {
  std::string s = std::string(to_string(precision)) + ", " + (fused ? "fused " + optimizer : "torch::optim::" + optimizer);
  if (threads > 0) s += ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  return s;
}

TuneCandidate choose_candidate(std::vector<TuneTrial>& trials, double bf16_tolerance, double fp32_tolerance) {
  const auto ref_it = std::find_if(trials.begin(), trials.end(), [](const TuneTrial& t) { return t.reference; });
  if (ref_it == trials.end()) throw std::runtime_error("auto-tune: no fp32 reference trial");
  const TuneTrial& ref = *ref_it;
  if (ref.losses.empty())
    throw std::runtime_error("auto-tune: the fp32 reference trial did not run" + (ref.note.empty() ? "" : ": " + ref.note));
  for (std::size_t i = 0; i < ref.losses.size(); ++i)
    if (!std::isfinite(ref.losses[i]))
      throw std::runtime_error("auto-tune: the fp32 reference's loss is " + std::to_string(ref.losses[i]) + " at step " +
                               std::to_string(i + 1) +
                               ": the model diverges with plain settings, so no candidate can be checked");
  TuneTrial* best = nullptr;
  for (TuneTrial& t : trials) {
    t.accepted = false;
    if (t.losses.empty()) {
      t.rel_diff = std::numeric_limits<double>::infinity();
      if (t.note.empty()) t.note = "did not run";
      continue;
    }
    if (t.losses.size() != ref.losses.size()) {
      t.rel_diff = std::numeric_limits<double>::infinity();
      t.note = "ran " + std::to_string(t.losses.size()) + " steps, the reference " + std::to_string(ref.losses.size());
      continue;
    }
    double worst = 0;
    std::size_t bad_step = 0;
    for (std::size_t i = 0; i < t.losses.size(); ++i) {
      if (!std::isfinite(t.losses[i])) {
        worst = std::numeric_limits<double>::infinity();
        bad_step = i + 1;
        break;
      }
      const double den = std::abs(ref.losses[i]);
      const double d = std::abs(t.losses[i] - ref.losses[i]) / (den > 0 ? den : 1.0);
      worst = std::max(worst, d);
    }
    t.rel_diff = worst;
    const double tol = t.candidate.precision == Dtype::fp32 ? fp32_tolerance : bf16_tolerance;
    std::ostringstream note;
    note.precision(3);
    if (bad_step) {
      note << "loss not finite at step " << bad_step;
    } else if (worst > tol) {
      note << "loss off fp32's by " << worst << " relative (tolerance " << tol << ")";
    } else if (!t.eligible) {
      note << "not allowed by the settings you fixed";
    } else {
      t.accepted = true;
      if (!best || t.median_ms < best->median_ms) best = &t;
    }
    t.note = note.str();
  }
  if (!best) {
    std::string why = "auto-tune: no candidate allowed by your settings passed the loss check:";
    for (const TuneTrial& t : trials)
      if (t.eligible) why += "\n  " + t.candidate.label() + ": " + t.note;
    throw std::runtime_error(why);
  }
  for (TuneTrial& t : trials)
    if (t.accepted && &t != best) {
      std::ostringstream note;
      note.precision(3);
      note << "passed; " << t.median_ms / best->median_ms << "x the fastest's time";
      t.note = note.str();
    }
  best->note = "fastest that passed";
  return best->candidate;
}

namespace {

using Clock = std::chrono::steady_clock;


std::string shape_of(const at::Tensor& t) {
  if (!t.defined()) return "none";
  std::ostringstream out;
  out << t.sizes() << ' ' << t.scalar_type();
  return out.str();
}

std::string model_signature(const TuneProblem& p) {
  std::ostringstream detail;
  std::int64_t elements = 0;
  std::size_t tensors = 0;
  for (const auto& item : p.model->named_parameters()) {
    detail << item.key() << ' ' << shape_of(item.value()) << ';';
    elements += item.value().numel();
    ++tensors;
  }
  for (const auto& item : p.model->named_buffers()) detail << item.key() << ' ' << shape_of(item.value()) << ';';
  std::ostringstream out;
  out << (p.name.empty() ? "model" : p.name) << ": " << tensors << " parameter tensors, " << elements
      << " parameters; input " << shape_of(p.input) << "; target " << shape_of(p.target)
      << "; ";
  if (p.sgd)
    out << "SGD momentum " << p.sgd->momentum << " dampening " << p.sgd->dampening << " nesterov "
        << (p.sgd->nesterov ? "on" : "off") << " weight_decay " << p.sgd->weight_decay;
  else
    out << "amsgrad " << (p.adamw.amsgrad ? "on" : "off");
  out << "; #" << hash_hex(detail.str());
  return out.str();
}

constexpr std::uint64_t kTrialSeed = 0x5eed;

}  // namespace

std::string autotune_device_fingerprint(const Context& ctx) {
  const Candidate& selected = ctx.require_device();
  const DeviceInfo& info = selected.device;
  std::vector<std::string> caps;
  for (Capability c : info.capabilities.typed) caps.emplace_back(to_string(c));
  std::sort(caps.begin(), caps.end());
  return selected.plugin + " plugin; " + info.id + "; " + info.name + "; " + info.vendor + "; memory " +
         std::to_string(info.memory_bytes) + "; capabilities " + text::join(caps) + "; " +
         std::to_string(std::thread::hardware_concurrency()) + " logical cores";
}

std::string autotune_versions(const Context& ctx) {
  const std::string& plugin = ctx.require_device().plugin;
  const PluginRecord* rec = ctx.plugin(plugin);
  return std::string("accelkit ") + ACCELKIT_VERSION_STRING + "; LibTorch " + TORCH_VERSION + "; " + plugin +
         " plugin " + (rec ? rec->version : std::string("?"));
}

// The candidates the auto-tuner may choose from, narrowed by what the user fixed.
struct TuneSpace {
  std::vector<TuneCandidate> all;
  TuneCandidate reference;  // fp32 + torch::optim, the first thread count
  // What the user fixed (config file, environment, command line), where they fixed it.
  std::optional<Dtype> precision;
  std::optional<bool> fused;
  std::optional<int> threads;
  bool eligible(const TuneCandidate& c) const {
    return (!precision || c.precision == *precision) && (!fused || c.fused == *fused) &&
           (!threads || c.threads == *threads);
  }
};

namespace {

void check_problem(const TuneProblem& p, const TuneOptions& o) {
  if (!p.model) throw std::invalid_argument("autotune: TuneProblem::model is null");
  if (!p.forward || !p.loss) throw std::invalid_argument("autotune: TuneProblem needs forward and loss");
  if (!p.input.defined()) throw std::invalid_argument("autotune: TuneProblem::input is undefined");
  if (o.steps < 1 || o.warmup < 0) throw std::invalid_argument("autotune: steps must be >= 1 and warmup >= 0");
  if (!(o.tolerance >= 0)) throw std::invalid_argument("autotune: tolerance must be >= 0");
}

// Why a cache entry cannot be used for this decision, or "".
std::string stale_reason(const TuneDecision& cached, const TuneDecision& d, const TuneSpace& space) {
  if (cached.device != d.device) return "stale: recorded for another device (" + cached.device + ")";
  if (cached.model != d.model) return "stale: recorded for another model (" + cached.model + ")";
  if (cached.versions != d.versions) return "stale: recorded with " + cached.versions;
  if (cached.space != d.space) return "stale: recorded for the candidates " + cached.space;
  if (std::none_of(space.all.begin(), space.all.end(),
                   [&](const TuneCandidate& c) { return c == cached.chosen && space.eligible(c); }))
    return "stale: its choice (" + cached.chosen.label() + ") is not a candidate here";
  return {};
}

// The reference first, then every other eligible candidate.
std::vector<TuneTrial> planned_trials(const TuneSpace& space) {
  auto trial_of = [](const TuneCandidate& c, bool is_reference, bool is_eligible) {
    TuneTrial t;
    t.candidate = c;
    t.reference = is_reference;
    t.eligible = is_eligible;
    return t;
  };
  std::vector<TuneTrial> trials{trial_of(space.reference, true, space.eligible(space.reference))};
  for (const auto& c : space.all)
    if (!(c == space.reference) && space.eligible(c)) trials.push_back(trial_of(c, false, true));
  return trials;
}

// "fastest of 4 candidates on mlp: 3.1 ms/step vs 9.8 ms for fp32 + torch::optim, ..."
std::string winner_line(const TuneDecision& d, const std::string& model_name) {
  const TuneTrial& ref = d.trials.front();
  const auto chosen = std::find_if(d.trials.begin(), d.trials.end(),
                                   [&](const TuneTrial& t) { return t.accepted && t.candidate == d.chosen; });
  if (chosen == d.trials.end()) return "no trial was accepted";
  std::ostringstream why;
  why.precision(3);
  why << "fastest of " << d.trials.size() << " candidates on " << (model_name.empty() ? "this model" : model_name)
      << ": " << chosen->median_ms << " ms/step vs " << ref.median_ms << " ms for fp32 + torch::optim, loss within "
      << chosen->rel_diff << " of fp32's";
  return why.str();
}

// The reference's target: a reduced-precision floating one widened to fp32, since the loss runs
// outside autocast in fp32 (rather than failing the fp32 trials).
at::Tensor fp32_target(const TuneProblem& p) {
  return p.target.defined() && (p.target.scalar_type() == at::kBFloat16 || p.target.scalar_type() == at::kHalf)
             ? p.target.to(at::kFloat)
             : p.target;
}

// What names a decision: the device, the model, the versions and the candidate space, and the
// cache key they hash to.
TuneDecision keyed_decision(const Context& ctx, const TuneProblem& p, const TuneOptions& o, const TuneSpace& space,
                            double bf16_tol, double fp32_tol) {
  const Config& s = ctx.config();
  TuneDecision d;
  d.device = autotune_device_fingerprint(ctx);
  d.model = model_signature(p);
  d.versions = autotune_versions(ctx);
  std::vector<std::string> names;
  for (const auto& c : space.all)
    if (space.eligible(c)) names.push_back(c.label());
  std::ostringstream sp;
  sp << text::join(names) << "; master_weights " << to_string(*s.master_weights) << "; blas_kernels "
     << to_string(*s.blas_kernels)
     << "; " << o.warmup << "+" << o.steps << " steps; tolerance " << bf16_tol << "/" << fp32_tol;
  d.space = sp.str();
  d.key = hash_hex(d.device + "\n" + d.model + "\n" + d.versions + "\n" + d.space);
  return d;
}

// Where the decision is cached: empty with autotune_cache off, or where caching is off
// (decision_cache_dir says why, once for the process).
std::string tune_cache_dir(const Config& s) { return *s.autotune_cache ? decision_cache_dir() : std::string(); }

// Writes the decision to d.cache_file, unless its trials were timed while other processes took
// the cores they needed: it then decides this run only (d.why says so). d.cache_file is cleared
// where nothing was written.
void cache_decision(TuneDecision& d, const std::string& cache_dir, const std::optional<CpuSample>& load_start,
                    c10::Device device) {
  int threads = at::get_num_threads();
  for (const TuneTrial& t : d.trials) threads = std::max(threads, t.candidate.threads);
  const std::string contention = device.is_cpu() ? contention_since(load_start, threads) : std::string();
  if (!cache_dir.empty() && !contention.empty()) {
    d.why += "; not cached: while the trials ran, " + contention + ", so the next run tunes again";
    spdlog::warn("autotune: {}", d.why);
    d.cache_file.clear();
  } else if (!cache_dir.empty()) {
    try {
      autotune_entry::write(d.cache_file, d);
    } catch (const std::exception& e) {
      spdlog::warn("autotune: cannot write the cache entry {}: {}", d.cache_file, e.what());
      d.cache_file.clear();
    }
  }
}

}  // namespace

namespace detail {

AutoTuner& AutoTuner::of(Runtime& rt) { return *rt.tuner_; }
const AutoTuner& AutoTuner::of(const Runtime& rt) { return *rt.tuner_; }

TuneSpace AutoTuner::tune_space(bool sgd) const {
  const Config& s = rt_.context_->config();
  const DeviceInfo& info = rt_.device_->info();
  TuneSpace space;
  if (s.precision.user_set() && *s.precision) space.precision = **s.precision;
  if (s.fused_optimizer.user_set() && *s.fused_optimizer != Toggle::automatic)
    space.fused = *s.fused_optimizer == Toggle::on;
  if (s.threads.user_set() && *s.threads > 0) space.threads = *s.threads;
  std::vector<Dtype> precisions{Dtype::fp32};
  if (info.capabilities.has(Capability::bf16)) precisions.push_back(Dtype::bf16);
  if (info.capabilities.has(Capability::fp16) && !rt_.torch_device_.is_cpu()) precisions.push_back(Dtype::fp16);
  std::vector<bool> fused{false};
  if (rt_.optimizers_ && (!sgd || info.capabilities.has(Capability::fused_sgd))) fused.push_back(true);
  std::vector<int> threads{0};
  if (rt_.torch_device_.is_cpu()) {
    PrecisionRequest r = rt_.settings_request();
    r.precision = Dtype::fp32;
    auto def = rt_.precision_rules_->plan(r);
    const int physical = def.ok() && def.value().threads > 0 ? def.value().threads : at::get_num_threads();
    const int logical = static_cast<int>(std::thread::hardware_concurrency());
    threads = {physical};
    if (logical > physical) threads.push_back(logical);
  }
  if (space.threads) threads = {*space.threads};
  for (Dtype pr : precisions)
    for (bool f : fused)
      for (int t : threads) space.all.push_back({pr, f, t, sgd ? "SGD" : "AdamW"});
  space.reference = {Dtype::fp32, false, threads.front(), sgd ? "SGD" : "AdamW"};
  return space;
}

void AutoTuner::adopt_tuning(const TuneDecision& decision, const TuneSpace& space, const std::string& source) {
  const TuneCandidate& c = decision.chosen;
  if (!space.precision) {
    rt_.current_.precision = c.precision;
    rt_.decide("precision", to_string(c.precision), source, decision.why);
  }
  if (!space.fused) {
    rt_.current_.fused_optimizer = c.fused ? Toggle::on : Toggle::off;
    rt_.decide("fused_optimizer", c.fused ? "on" : "off", source, decision.why);
  }
  if (!space.threads && c.threads > 0) {
    rt_.current_.threads = c.threads;
    rt_.decide("threads", std::to_string(c.threads), source, decision.why);
  }
  PrecisionRequest r = rt_.settings_request();
  r.precision = c.precision;
  r.threads = c.threads;
  rt_.apply_plan(r);
  last_ = decision;
  rt_.steps_->no_step_tuning("the auto-tuner decided (" + source + ")");
}

void AutoTuner::run_trial(const TuneProblem& p, const TuneOptions& o, const at::Tensor& target, TuneTrial& t) {
  struct TrialFlag {
    bool& flag;
    explicit TrialFlag(bool& f) : flag(f) { flag = true; }
    ~TrialFlag() { flag = false; }
  } trial_flag(rt_.in_trial_);
  try {
    at::manual_seed(kTrialSeed);
    PrecisionRequest r = rt_.settings_request();
    r.precision = t.candidate.precision;
    r.threads = t.candidate.threads;
    rt_.apply_plan(r);
    const Toggle fused = t.candidate.fused ? Toggle::on : Toggle::off;
    OptimizerChoice opt = p.sgd ? rt_.make_sgd_as(p.model->parameters(), *p.sgd, fused)
                                : rt_.make_adamw_as(p.model->parameters(), p.adamw, fused);
    LossScaler scaler = rt_.make_loss_scaler();
    std::vector<double> ms;
    for (int step = 0; step < o.warmup + o.steps; ++step) {
      detail::synchronize(rt_.torch_device_);
      const auto t0 = Clock::now();
      zero_grad(*opt.optimizer);
      at::Tensor out;
      {
        auto guard = rt_.plan_autocast();
        out = p.forward(p.input);
      }
      at::Tensor loss = p.loss(out.to(at::kFloat), target);
      scaler.scale(loss).backward();
      scaler.step(*opt.optimizer);
      detail::synchronize(rt_.torch_device_);
      const double elapsed = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      t.losses.push_back(loss.item<double>());
      if (step >= o.warmup) ms.push_back(elapsed);
    }
    t.median_ms = stats::median(ms);
  } catch (const std::exception& e) {
    t.losses.clear();
    t.note = std::string("failed: ") + e.what();
  }
}

void AutoTuner::run_trials(const TuneProblem& p, const TuneOptions& o, const at::Tensor& target,
                           ModelSnapshot& snapshot, std::vector<TuneTrial>& trials) {
  for (std::size_t i = 0; i < trials.size(); ++i) {
    if (o.progress) o.progress(TuneProgress{static_cast<int>(i), static_cast<int>(trials.size()), trials[i].candidate.label()});
    snapshot.restore(false);
    run_trial(p, o, target, trials[i]);
  }
  snapshot.restore(true);
  if (o.progress) o.progress(TuneProgress{static_cast<int>(trials.size()), static_cast<int>(trials.size()), {}});
}

TuneCandidate AutoTuner::choose(std::vector<TuneTrial>& trials, double bf16_tol, double fp32_tol,
                                const PrecisionPlan& plan_before) {
  try {
    return choose_candidate(trials, bf16_tol, fp32_tol);
  } catch (...) {
    rt_.plan_ = plan_before;
    (void)rt_.precision_rules_->apply(rt_.plan_);
    detail::set_operator_kernels_open(!rt_.plan_.kernels.empty());
    throw;
  }
}

TuneDecision AutoTuner::settings_decision(const TuneProblem& p) {
  const Config& s = rt_.context_->config();
  TuneDecision d;
  d.origin = "settings";
  d.chosen = {rt_.plan_.dtype, rt_.current_.fused_optimizer != Toggle::off && rt_.optimizers_ != nullptr,
              rt_.plan_.threads, p.sgd ? "SGD" : "AdamW"};
  d.why = "autotune is off (" + s.autotune.from() + ")";
  last_ = d;
  return d;
}

std::optional<TuneDecision> AutoTuner::from_cache(const TuneDecision& d, const TuneSpace& space) {
  std::string problem;
  auto cached = autotune_entry::read(d.cache_file, &problem);
  if (cached && (problem = stale_reason(*cached, d, space)).empty()) {
    cached->chosen.optimizer = space.reference.optimizer;
    adopt_tuning(*cached, space, "autotune cache " + d.cache_file);
    return cached;
  }
  if (!problem.empty())
    spdlog::warn("autotune: ignoring the cache entry {}: {}; tuning again and rewriting it", d.cache_file, problem);
  return std::nullopt;
}

TuneDecision AutoTuner::tune(const TuneProblem& p, const TuneOptions& o) {
  check_problem(p, o);
  const Config& s = rt_.context_->config();
  if (!*s.autotune) return settings_decision(p);

  const TuneSpace space = tune_space(p.sgd.has_value());
  const double bf16_tol = o.tolerance > 0 ? o.tolerance : 2e-2;
  const double fp32_tol = o.tolerance > 0 ? o.tolerance : 1e-3;
  TuneDecision d = keyed_decision(*rt_.context_, p, o, space, bf16_tol, fp32_tol);
  const std::string cache_dir = tune_cache_dir(s);
  if (!cache_dir.empty()) {
    d.cache_file = autotune_entry::path(cache_dir, d.key);
    if (auto cached = from_cache(d, space)) return *cached;
  }

  // Trials, each from the same weights, data and random state.
  std::vector<TuneTrial> trials = planned_trials(space);
  const at::Tensor target = fp32_target(p);
  const PrecisionPlan plan_before = rt_.plan_;
  ModelSnapshot snapshot(*p.model);
  const std::optional<CpuSample> load_start = sample_cpu();
  run_trials(p, o, target, snapshot, trials);

  d.chosen = choose(trials, bf16_tol, fp32_tol, plan_before);
  d.trials = std::move(trials);
  d.origin = "benchmark";
  d.created = decision_cache::utc_now();
  d.why = winner_line(d, p.name);
  cache_decision(d, cache_dir, load_start, rt_.torch_device_);
  adopt_tuning(d, space, "autotune on " + d.created);
  return d;
}

}  // namespace detail

TuneDecision autotune(Runtime& rt, const TuneProblem& problem, const TuneOptions& options) {
  return detail::AutoTuner::of(rt).tune(problem, options);
}

const std::optional<TuneDecision>& last_tune_decision(const Runtime& rt) {
  return detail::AutoTuner::of(rt).last();
}

}  // namespace accelkit
