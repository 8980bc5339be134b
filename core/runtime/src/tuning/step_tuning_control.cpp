// Step tuning's part in the Runtime (step_tuning_control.hpp): the candidates, the switch on
// each autocast() scope, the decision recorded and cached.
#include "step_tuning_control.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "accelkit/autotune.hpp"
#include "accelkit/base/strings.hpp"
#include "accelkit/decision_cache.hpp"
#include "accelkit/runtime.hpp"
#include "kernel_registry.hpp"
#include "plugin_call.hpp"

namespace accelkit::detail {

namespace {

constexpr int kStepCacheFormat = 1;

std::string step_candidates_text(const std::vector<StepConfig>& cs) {
  std::string s;
  for (const auto& c : cs) s += (s.empty() ? "" : "; ") + c.label();
  return s;
}

// Cores other processes kept busy since the previous call (/proc/stat), for the tuner's watch.
StepTuner::Load machine_load_reading() {
  auto last = std::make_shared<std::optional<CpuSample>>(sample_cpu());
  return [last] {
    const std::optional<CpuSample> now = sample_cpu();
    const double others = now && *last ? other_cores(**last, *now) : -1.0;
    *last = now;
    return others;
  };
}

}  // namespace

StepKernels StepTuning::plan_kernels() const noexcept {
  return rt_.precision().kernels.empty() ? StepKernels::none : StepKernels::plugin;
}

void StepTuning::setup() {
  const Config& s = rt_.context().config();
  const PrecisionPlan& negotiated = rt_.precision();
  if (!*s.step_tuning) return turn_off("step_tuning = off (from " + s.step_tuning.from() + ")");
  const int threads = negotiated.threads > 0 ? negotiated.threads : at::get_num_threads();
  const StepKernels kernels = plan_kernels();
  StepConfig plan{negotiated.autocast, rt_.autocast_dtype(), threads, kernels};
  std::vector<StepConfig> cs{plan};
  std::vector<std::string> fixed;
  if (s.precision.user_set()) fixed.push_back("precision (from " + s.precision.from() + ")");
  else if (negotiated.autocast) cs.push_back({false, at::kFloat, threads, kernels});
  if (s.threads.user_set()) fixed.push_back("threads (from " + s.threads.from() + ")");
  else if (rt_.device().is_cpu() && threads >= 2) {
    const std::size_t n = cs.size();
    for (std::size_t i = 0; i < n; ++i) cs.push_back({cs[i].autocast, cs[i].dtype, threads / 2, kernels});
  }
  // The plugin's kernels are measured too: against LibTorch's on the configuration a user
  // tunes by hand (fp32 - or the dtype the user fixed - at the plan's threads).
  if (s.kernels.user_set()) fixed.push_back("kernels (from " + s.kernels.from() + ")");
  else if (kernels == StepKernels::plugin) {
    const bool ac = s.precision.user_set() && negotiated.autocast;
    cs.push_back({ac, ac ? rt_.autocast_dtype() : at::kFloat, threads, StepKernels::libtorch});
  }
  if (cs.size() < 2)
    return turn_off(fixed.empty() ? "nothing to choose between: the plan is fp32 with one thread, or not on a CPU"
                                  : "nothing left to choose: the user fixed " + text::join(fixed, " and "));
  make_tuner(cs);
}

void StepTuning::make_tuner(const std::vector<StepConfig>& cs) {
  // The load of other processes matters to the thread counts a CPU runs; elsewhere the watch
  // reads the step's time only.
  tuner_ = std::make_unique<StepTuner>(cs, StepTuner::Options{}, StepTuner::Clock{},
                                       rt_.device().is_cpu() ? machine_load_reading() : StepTuner::Load{});
  if (agreement_) tuner_->set_agreement(agreement_, ++generation_);
  const Config& s = rt_.context().config();
  if (!*s.step_retune) tuner_->stop_revisiting("step_retune = off (from " + s.step_retune.from() + ")");
  source_note_.clear();
  copy_status();
}

void StepTuning::copy_status() {
  changes_seen_ = tuner_->changes();
  status_ = tuner_->status();
  status_.source += source_note_;
  // (While it observes, the tuner's why holds the note already.)
  if (!layout_note_.empty() && tuner_->decided() && !status_.reobserving) status_.why += "; " + layout_note_;
}

void StepTuning::agree_on_steps(StepAgreement agreement) {
  agreement_ = std::move(agreement);
  if (!tuner_ || tuner_->decided() || tuner_->status().steps_seen > 0) {
    no_step_tuning("off in this data-parallel run: it began after the observation of the training steps had");
    return;
  }
  // Candidates again, at the threads each rank now has.
  setup();
}

// Every rank of a data-parallel run steps with the same implementation: each measured (or read
// its own host's cache) and may have chosen another, whose rounding differs, and the ranks'
// weights would drift apart. Rank 0's choice is every rank's.
void StepTuning::agree_on_adamw(AdamWImplChoice& choice, Optimizer& optimizers) const {
  if (!agreement_.rank0) return;
  const std::string mine = choice.name;
  const std::string first = agreement_.rank0("adamw_implementation", mine);
  if (first == mine) {
    choice.why += "; rank 0 chose the same, which every rank takes";
    return;
  }
  const std::string who = rt_.context().require_device().plugin + " plugin";
  for (const auto& i : call_plugin(who, "Optimizer::adamw_implementations()",
                                   [&] { return optimizers.adamw_implementations(); }))
    if (i.name == first) {
      choice.name = i.name;
      choice.description = i.description;
      choice.why = "rank 0's choice, which every rank of a data-parallel run takes (this rank had " + mine +
                   ": " + choice.why + ")";
      return;
    }
  throw std::runtime_error("rank 0 steps AdamW with " + first + ", which this rank's " + who +
                           " does not offer: every rank must run the same build");
}

void StepTuning::note_module(torch::nn::Module& module) {
  if (!tuner_ || tuner_->decided() || tuner_->status().steps_seen > 0) return;
  const Toggle wanted = *rt_.context().config().channels_last;
  if (wanted == Toggle::off) return;
  if (!layout_) layout_ = std::make_unique<WeightLayout>();
  const bool offered = layout_->weights() > 0;  // for a model prepared before
  layout_->add(module);
  if (offered || layout_->weights() == 0) return;
  // auto: a program that view()s a convolution's output fails on channels-last activations
  // (pytorch/examples' MNIST does: x.view({-1, 320})), so its first step is watched first.
  if (wanted == Toggle::automatic) layout_pending_ = true;
  else offer_channels_last();
}

void StepTuning::offer_channels_last() {
  // Each precision at the most threads (the plan's, and fp32 where the plan is autocast) with
  // channels-last weights: which precision wins depends on the CPU (bf16 autocast ran ResNet-20
  // 2x faster than fp32 on a Zen 4 and 1.14x slower on a Xeon without AMX), and the layout's gain
  // on both. Each candidate more costs observation steps, so not at fewer threads.
  std::vector<StepConfig> cs = tuner_->status().candidates;
  int most = 0;
  for (const StepConfig& c : cs) most = std::max(most, c.threads);
  const std::size_t n = cs.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (cs[i].threads != most || cs[i].kernels == StepKernels::libtorch || cs[i].channels_last) continue;
    StepConfig cl = cs[i];
    cl.channels_last = true;
    cs.push_back(cl);
  }
  make_tuner(cs);
}

void StepTuning::watch_layout() {
  if (!layout_pending_) return;
  if (tuner_->decided()) {  // a cached decision, taken without it
    layout_watch_.reset();
    layout_pending_ = false;
    return;
  }
  if (!layout_watch_) {
    layout_watch_ = std::make_unique<ChannelsLastWatch>();  // the step beginning now
    return;
  }
  if (tuner_->status().steps_seen < 1) return;
  const ChannelsLastWatch::Verdict v = layout_watch_->finish();
  layout_watch_.reset();
  layout_pending_ = false;
  if (!v.safe) {
    layout_note_ = "channels-last weights not timed: " + v.why;
    spdlog::info("step tuning: {}", layout_note_);
    tuner_->note(layout_note_);
    copy_status();
    return;
  }
  spdlog::info("step tuning: channels-last weights timed too: {}", v.why);
  offer_channels_last();  // observation begins again, with it
}

void StepTuning::turn_off(std::string why) {
  // Off before a decision: the weights as the program made them.
  if (layout_ && channels_last_ && !(tuner_ && tuner_->decided())) {
    layout_->apply(false);
    channels_last_ = false;
  }
  layout_watch_.reset();
  layout_pending_ = false;
  tuner_.reset();
  status_.state = StepTuningStatus::State::off;
  status_.why = std::move(why);
}

void StepTuning::no_step_tuning(const std::string& why) {
  if (!tuner_) return;
  if (!tuner_->decided()) return turn_off(why);
  tuner_->stop_revisiting(why);  // the decision stands, no longer revisited
  copy_status();
}

void StepTuning::drop_unweighted_candidates(const std::string& why) {
  // The model's weights became bf16 (master weights): a step outside autocast cannot run.
  if (!tuner_) return;
  std::vector<StepConfig> keep;
  for (const auto& c : tuner_->status().candidates)
    if (c.autocast) keep.push_back(c);
  if (tuner_->decided()) {  // a re-observation must not run the others
    if (keep.size() < tuner_->status().candidates.size()) no_step_tuning(why);
    return;
  }
  if (keep.size() < 2) return no_step_tuning(why);
  make_tuner(keep);
  tuner_->note(why);
  copy_status();
}

std::string StepTuning::cache_path(std::string& key) const {
  const Context& ctx = rt_.context();
  // A data-parallel run's decision is its ranks' (and hosts'), decided together each run.
  if (!*ctx.config().autotune_cache || model_signature_.empty() || agreement_) return {};
  const std::string dir = decision_cache_dir();
  if (dir.empty()) return {};
  key = autotune_device_fingerprint(ctx) + " | " + autotune_versions(ctx) + " | " + model_signature_ + " | " +
        step_candidates_text(tuner_->status().candidates);
  return dir + "/steps/" + decision_cache::hash_hex(key) + ".json";
}

void StepTuning::read_cache() {
  std::string key;
  const std::string path = cache_path(key);
  if (path.empty()) return;
  std::string problem;
  auto text = decision_cache::read_entry_text(path, &problem);
  if (!text) {
    if (!problem.empty()) spdlog::warn("step tuning: ignoring the cache entry {}: {}", path, problem);
    return;
  }
  try {
    const auto j = nlohmann::json::parse(*text);
    if (j.at("format").get<int>() != kStepCacheFormat || j.at("key").get<std::string>() != key) return;
    const std::string chosen = j.at("chosen").get<std::string>();
    const auto& cs = tuner_->status().candidates;
    for (std::size_t i = 0; i < cs.size(); ++i)
      if (cs[i].label() == chosen) {
        tuner_->adopt(i, "step-tuning cache " + path, j.at("why").get<std::string>(), j.value("other_cores", -1.0));
        return;
      }
    spdlog::warn("step tuning: ignoring the cache entry {}: its choice '{}' is no candidate here", path, chosen);
  } catch (const std::exception& e) {
    spdlog::warn("step tuning: ignoring the cache entry {}: {}", path, e.what());
  }
}

void StepTuning::write_cache() {
  std::string key;
  const std::string path = cache_path(key);
  if (path.empty()) {
    if (agreement_) spdlog::info("step tuning: not cached (a data-parallel run's ranks decide together each run)");
    else if (model_signature_.empty())
      spdlog::info("step tuning: not cached (no optimizer was made through this runtime to name the model by)");
    return;
  }
  const auto& st = tuner_->status();
  nlohmann::json j;
  j["format"] = kStepCacheFormat;
  j["key"] = key;
  j["created"] = decision_cache::utc_now();
  j["chosen"] = st.candidates[st.chosen].label();
  j["why"] = st.why;
  j["source"] = st.source;
  j["other_cores"] = tuner_->decision_load();  // the reference a later run's watch starts from
  for (std::size_t i = 0; i < st.candidates.size(); ++i)
    j["median_ms"][st.candidates[i].label()] = i < st.median_ms.size() ? st.median_ms[i] : 0.0;
  try {
    decision_cache::write_entry_text(path, j.dump(2) + "\n");
    source_note_ = "; cached in " + path;
    status_.source += source_note_;
  } catch (const std::exception& e) {
    spdlog::warn("step tuning: cannot write the cache entry {}: {}", path, e.what());
  }
}

namespace {
// Training scopes a step may hold before the first Runtime::step marks one (expect_step_marks).
constexpr int kScopesBeforeMarks = 64;
}  // namespace

StepConfig StepTuning::config() {
  const StepConfig plan{rt_.precision().autocast, rt_.autocast_dtype(), 0, plan_kernels()};
  if (!tuner_) return plan;
  if (AutocastScope::depth() > 0) return current_;  // inside a step: as the step began
  const bool training = at::GradMode::is_enabled();
  if (mark_pending_) {  // the marking step was taken inside the last scope: this one begins the next
    mark_pending_ = false;
    const StepConfig c = advance(true);
    if (training) return c;
  }
  if (step_marker_ != nullptr && training) return current_;  // the optimizer's steps mark the steps
  if (marks_expected_ && training && scopes_unmarked_++ > 0) {
    if (scopes_unmarked_ <= kScopesBeforeMarks) return current_;  // the first step, until its mark
    marks_expected_ = false;  // the program steps its optimizer itself: each scope is a step
    spdlog::info("step tuning: no Runtime::step within {} training scopes: each scope counts as a step",
                 kScopesBeforeMarks);
  }
  return advance(training);
}

void StepTuning::optimizer_stepped(const void* optimizer) {
  if (!tuner_) return;
  if (step_marker_ == nullptr) {
    // The mark is the optimizer that steps last in a step: the one stepped just before the first
    // one steps again (a GAN steps D, then G: G's steps end its steps; tensors made before D's
    // step, G's images, are used after it).
    if (first_stepped_ == nullptr) first_stepped_ = optimizer;
    else if (optimizer == first_stepped_) step_marker_ = last_stepped_;
    last_stepped_ = optimizer;
  }
  if (step_marker_ == nullptr || optimizer != step_marker_) return;
  // A loop whose autocast() guard is held over its optimizer's step (declared at the top of the
  // loop's body): the step ends there, and the next scope begins the next one.
  if (AutocastScope::depth() > 0) mark_pending_ = true;
  else advance(true);
}

StepConfig StepTuning::advance(bool training) {
  if (training) watch_layout();
  if (!tuner_->decided() && tuner_->status().steps_seen == 0 && training) read_cache();
  const StepConfig& c = tuner_->enter(training);
  // While decided and watching, the status stays as it is: nothing is copied per step.
  const bool changed = tuner_->changes() != changes_seen_;
  if (changed || tuner_->observing()) {
    copy_status();
    if (!tuner_->decided() && status_.steps_seen == 1) load_start_ = sample_cpu();
    if (changed) on_change();
  }
  apply_config(c);
  return c;
}

void StepTuning::on_change() {
  const std::string watched = tuner_->take_watch_note();
  if (!watched.empty()) spdlog::info("step tuning: {}", watched);
  if (tuner_->take_new_decision()) {
    source_note_.clear();  // the last decision's cache note
    copy_status();
    return settle_decision();
  }
  if (status_.reobserving) {  // a re-observation begins: its load from here, for the cache
    load_start_ = sample_cpu();
    spdlog::info("step tuning: {}", status_.why);
    return;
  }
  if (!watched.empty()) return;  // new references: the decision stands
  const StepConfig& chosen = status_.candidates[status_.chosen];  // adopted from the cache
  rt_.context().record({"step_tuning", chosen.label(), status_.source, status_.why});
  spdlog::info("step tuning: {} from now on - {} [{}]", chosen.label(), status_.why, status_.source);
}

void StepTuning::settle_decision() {
  // Steps timed while other processes took the cores they needed decide this run only.
  int threads = at::get_num_threads();
  for (const StepConfig& s : status_.candidates) threads = std::max(threads, s.threads);
  // (Only where it would be cached: a data-parallel run's ranks, which share the cores,
  // decide together each run anyway.)
  std::string key;
  const std::string contention =
      rt_.device().is_cpu() && !cache_path(key).empty() ? contention_since(load_start_, threads) : std::string();
  if (contention.empty()) {
    write_cache();
  } else {
    source_note_ = "; not cached: while it observed, " + contention + ", so the next run observes again";
    status_.source += source_note_;
    spdlog::warn("step tuning: {}", status_.source);
  }
  const StepConfig& chosen = status_.candidates[status_.chosen];
  rt_.context().record({"step_tuning", chosen.label(), status_.source, status_.why});
  spdlog::info("step tuning: {} from now on - {} [{}]", chosen.label(), status_.why, status_.source);
}

void StepTuning::apply_config(const StepConfig& c) {
  if (c.threads > 0 && at::get_num_threads() != c.threads) at::set_num_threads(c.threads);
  // The whole step runs as the candidate says, not only the scope: the plan switched the
  // thread's autocast on at start, so the loss and anything else outside the scope would
  // otherwise still run in the plan's dtype under an fp32 candidate.
  const c10::DeviceType type = rt_.device().type();
  if (compat::autocast_available(type)) {
    if (c.autocast) compat::set_autocast_dtype(type, c.dtype);
    compat::set_autocast_enabled(type, c.autocast);
  }
  set_operator_kernels_open(c.kernels == StepKernels::plugin);
  if (layout_ && c.channels_last != channels_last_) {
    layout_->apply(c.channels_last);
    channels_last_ = c.channels_last;
  }
  current_ = c;
}

void StepTuning::note_model(const std::vector<at::Tensor>& params, const char* optimizer) {
  std::ostringstream sig;
  sig << optimizer << " over " << params.size() << " tensors:";
  for (const auto& p : params) {
    sig << " " << c10::toString(p.scalar_type()) << "[";
    for (std::size_t i = 0; i < static_cast<std::size_t>(p.dim()); ++i) sig << (i ? "," : "") << p.size(static_cast<int64_t>(i));
    sig << "]";
  }
  // One entry per set of parameters, known by its first one: a model prepared and then an
  // optimizer made over it are one entry (the later names it), two models (a GAN's) are two.
  const void* first = params.empty() ? nullptr : params.front().unsafeGetTensorImpl();
  auto it = std::find_if(models_.begin(), models_.end(), [&](const auto& m) { return m.first == first; });
  if (it != models_.end()) it->second = sig.str();
  else models_.emplace_back(first, sig.str());
  model_signature_.clear();
  for (const auto& m : models_) model_signature_ += (model_signature_.empty() ? "" : " + ") + m.second;
}

}  // namespace accelkit::detail
