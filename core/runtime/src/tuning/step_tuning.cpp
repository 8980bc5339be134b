// Observe, then switch (step_tuning.hpp): the state machine, and the autocast() scope that
// counts the steps (the Runtime's part is step_tuning_control.cpp).
#include "accelkit/step_tuning.hpp"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <cmath>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "accelkit/runtime.hpp"
#include "accelkit/base/median.hpp"
#include "accelkit/base/strings.hpp"

namespace accelkit {

namespace {

double step_now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string StepConfig::label() const {
  std::string s = autocast ? std::string(c10::toString(dtype)) + " autocast" : "fp32";
  if (autocast) {
    if (dtype == at::kBFloat16) s = "bf16 autocast";
    else if (dtype == at::kHalf) s = "fp16 autocast";
  }
  if (threads > 0) s += ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  if (kernels == StepKernels::libtorch) s += ", LibTorch's kernels";
  if (channels_last) s += ", channels-last";
  return s;
}

namespace {

void check_step_options(const StepTuner::Options& o) {
  if (o.rounds < 1 || o.warmup_rounds < 0 || o.give_up_factor < 1 || o.steps_per_turn < 1 || o.settle_steps < 0)
    throw std::invalid_argument(
        "step tuning: rounds >= 1, warmup_rounds >= 0, steps_per_turn >= 1, settle_steps >= 0 and give_up_factor >= 1");
  if (o.race_factor != 0 && (o.race_factor <= 1 || o.race_after < 1))
    throw std::invalid_argument("step tuning: race_factor is 0 (off) or above 1, with race_after >= 1");
  if (o.revisit && (o.watch_ms < 0 || o.watch_steps < 1 || o.sustain_windows < 1 || o.gap_windows < 0 ||
                    o.max_gap_windows < o.gap_windows || o.revisit_rounds < 1 || o.load_change <= 0 ||
                    o.load_fall_min <= 0 || o.time_change <= 0))
    throw std::invalid_argument(
        "step tuning: watch_ms >= 0, watch_steps, sustain_windows and revisit_rounds >= 1, 0 <= gap_windows <= "
        "max_gap_windows, load_change, load_fall_min and time_change > 0");
}

}  // namespace

StepTuner::StepTuner(std::vector<StepConfig> candidates, Options options, Clock clock, Load load)
    : options_(options),
      obs_warmup_(options.warmup_rounds),
      obs_rounds_(options.rounds),
      load_(std::move(load)),
      clock_(clock ? std::move(clock) : Clock(step_now_ms)) {
  if (candidates.empty()) throw std::invalid_argument("step tuning needs at least one candidate");
  check_step_options(options_);
  status_.candidates = std::move(candidates);
  status_.samples.assign(status_.candidates.size(), {});
  active_.assign(status_.candidates.size(), true);
  status_.state = StepTuningStatus::State::observing;
  if (!options_.revisit) status_.no_revisit = "revisiting is off";
  last_threads_ = status_.candidates.front().threads;  // the plan's, applied at start
  status_.why = observing_why();
  start_round();
}

std::int64_t StepTuner::expected_steps(int warmup, int rounds) const {
  // A turn per candidate a round, and the settle steps at each change of the thread count
  // (the groups alternate their order, so a round changes it once per group boundary).
  const auto n = static_cast<std::int64_t>(std::count(active_.begin(), active_.end(), true));
  const auto changes = static_cast<std::int64_t>(thread_groups().size()) - 1;
  return static_cast<std::int64_t>(warmup + rounds) * (n * options_.steps_per_turn + changes * options_.settle_steps);
}

std::vector<int> StepTuner::thread_groups() const {
  std::vector<int> groups;
  for (std::size_t i = 0; i < status_.candidates.size(); ++i) {
    const int t = status_.candidates[i].threads;
    if (active_[i] && std::find(groups.begin(), groups.end(), t) == groups.end()) groups.push_back(t);
  }
  return groups;
}

std::string StepTuner::observing_why() const {
  std::string cs;
  for (std::size_t i = 0; i < status_.candidates.size(); ++i)
    if (active_[i]) cs += (cs.empty() ? "" : "; ") + status_.candidates[i].label();
  if (!note_.empty()) cs += "; " + note_;
  if (!raced_why_.empty() && !status_.reobserving) cs += "; timed no more: " + raced_why_;
  if (!status_.reobserving)
    return "observing the program's first training steps (" + cs + "): step " + std::to_string(status_.steps_seen) +
           " of about " + std::to_string(expected_steps(obs_warmup_, obs_rounds_));
  const std::int64_t step = training_steps_ - obs_first_step_ + 1;
  return "re-observing on the program's training steps (" + cs + "): " +
         (step > 0 ? "step " + std::to_string(step) + " of about " : "from the next step, about ") +
         std::to_string(expected_steps(obs_warmup_, obs_rounds_)) + (step > 0 ? ", " : " steps, ") +
         status_.candidates[status_.chosen].label() + " standing meanwhile; " + reason_;
}

void StepTuner::note(std::string text) {
  note_ = std::move(text);
  if (observing()) status_.why = observing_why();
}

void StepTuner::start_round() {
  // Grouped by thread count, the groups' order reversed every other round (the round starts
  // with the thread count the last one ended with); shuffled within a group, so that a
  // program whose scopes are not one per step (micro-batches, an optimizer step every k-th
  // scope) does not hand the slow scope to one candidate.
  std::vector<int> groups = thread_groups();
  if (round_ % 2 == 1) std::reverse(groups.begin(), groups.end());
  order_.clear();
  for (int g : groups) {
    const std::size_t from = order_.size();
    for (std::size_t i = 0; i < status_.candidates.size(); ++i)
      if (active_[i] && status_.candidates[i].threads == g) order_.push_back(i);
    std::shuffle(order_.begin() + static_cast<std::ptrdiff_t>(from), order_.end(), shuffle_);
  }
  pos_ = 0;
}

const StepConfig& StepTuner::enter(bool training) {
  if (training) ++training_steps_;
  if (decided() && !status_.reobserving) {
    watch(training);
    return status_.candidates[status_.chosen];
  }
  // Outside the candidates' turns a scope runs the plan (observing) or the standing choice
  // (re-observing), at its thread count.
  const StepConfig& rest = status_.candidates[decided() ? status_.chosen : 0];
  if (!training) {
    pending_ = false;  // the evaluation's time is no candidate's
    // A turn it interrupts at another thread count is over (the candidate goes without a
    // sample this round; one whose turns are always interrupted is left out of the decision,
    // and the decision says so).
    if (turn_step_ > 0 && status_.candidates[order_[pos_]].threads != rest.threads) end_turn();
    last_threads_ = rest.threads;
    return rest;
  }
  const double now = clock_();
  if (pending_ && pending_timed_) status_.samples[pending_index_].push_back(now - pending_start_);
  // A round begins (its last turn's interval just taken): the candidates that cannot win leave.
  if (pos_ == 0 && turn_step_ == 0 && race()) start_round();
  if (!status_.reobserving && ++status_.steps_seen == 1 && load_) load_();  // the observation's load from here
  status_.why = observing_why();

  bool enough = true;
  for (std::size_t i = 0; i < status_.samples.size(); ++i)
    enough = enough && (!active_[i] || static_cast<int>(status_.samples[i].size()) >= obs_rounds_);
  // At most give_up_factor times the steps a full observation takes.
  const std::int64_t limit = static_cast<std::int64_t>(obs_warmup_ + obs_rounds_) * options_.give_up_factor *
                             std::count(active_.begin(), active_.end(), true) *
                             (options_.steps_per_turn + options_.settle_steps);
  const std::int64_t seen = status_.reobserving ? training_steps_ - obs_first_step_ + 1 : status_.steps_seen;
  if (enough || seen > limit) return finish_observation();

  const std::size_t index = order_[pos_];
  if (turn_step_ == 0) {  // a turn begins
    const int threads = status_.candidates[index].threads;
    turn_len_ = options_.steps_per_turn + (threads != last_threads_ ? options_.settle_steps : 0);
    last_threads_ = threads;
  }
  pending_ = true;
  pending_index_ = index;
  pending_timed_ = round_ >= obs_warmup_ && turn_step_ + 1 == turn_len_;
  pending_start_ = now;
  if (++turn_step_ == turn_len_) end_turn();
  return status_.candidates[index];
}

const StepConfig& StepTuner::finish_observation() {
  pending_ = false;
  if (status_.reobserving) {
    redecide();
    return status_.candidates[status_.chosen];
  }
  if (!agreement_) {
    decide();
    return status_.candidates[status_.chosen];
  }
  if (!published_) {
    observed_steps_ = status_.steps_seen - 1;
    agreement_.publish(generation_, payload());
    published_ = true;
    status_.why = "observed; waiting for the other ranks' observations (running the plan meanwhile)";
  }
  const std::optional<std::vector<std::string>> all = agreement_.poll(generation_);
  if (!all) return status_.candidates.front();
  if (all->empty()) decide();  // the process group is gone: nobody left to agree with
  else decide_together(*all);
  return status_.candidates[status_.chosen];
}

void StepTuner::end_turn() {
  turn_step_ = 0;
  if (++pos_ == order_.size()) {
    ++round_;
    start_round();
  }
}

bool StepTuner::race() {
  if (options_.race_factor == 0 || status_.reobserving || agreement_) return false;
  const std::size_t n = status_.candidates.size();
  const auto ready = [&](std::size_t i) {
    return active_[i] && static_cast<int>(status_.samples[i].size()) >= options_.race_after;
  };
  double fastest = -1;
  int threads = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (ready(i)) {
      const double m = stats::median(status_.samples[i]);
      if (fastest < 0 || m < fastest) fastest = m, threads = status_.candidates[i].threads;
    }
  if (fastest <= 0) return false;
  bool left = false;
  // Never the plan: the decision is taken against it. Only candidates with fewer threads than the
  // fastest: other processes' load makes those look faster, never slower, so a burst of it
  // cannot leave them out wrongly (one at the same count, timed during a burst, could be).
  for (std::size_t i = 1; i < n; ++i) {
    if (!ready(i) || status_.candidates[i].threads >= threads) continue;
    if (static_cast<int>(status_.samples[i].size()) >= obs_rounds_) continue;  // timed in full already
    const double best = *std::min_element(status_.samples[i].begin(), status_.samples[i].end());
    if (best < fastest * options_.race_factor) continue;
    active_[i] = false;
    left = true;
    std::ostringstream w;
    w << (raced_why_.empty() ? "" : "; ") << status_.candidates[i].label() << " "
      << text::ms_text(stats::median(status_.samples[i])) << " (median of " << status_.samples[i].size()
      << " timed steps)";
    raced_why_ += w.str();
  }
  return left;
}

void StepTuner::decide() {
  const std::size_t n = status_.candidates.size();
  std::vector<double> medians;
  std::vector<bool> timed(n);
  for (std::size_t i = 0; i < n; ++i) {
    medians.push_back(stats::median(status_.samples[i]));
    timed[i] = static_cast<int>(status_.samples[i].size()) >= obs_rounds_;
  }
  if (!published_) observed_steps_ = status_.steps_seen - 1;
  decide_on(medians, timed, "");
}

void StepTuner::set_agreement(StepAgreement agreement, int generation) {
  agreement_ = std::move(agreement);
  generation_ = generation;
  if (agreement_) stop_revisiting("a data-parallel run's ranks decide together, once");
}

std::string StepTuner::payload() const {
  nlohmann::json j;
  for (std::size_t i = 0; i < status_.candidates.size(); ++i) {
    const bool timed = static_cast<int>(status_.samples[i].size()) >= obs_rounds_;
    j["candidates"].push_back(status_.candidates[i].label());
    j["median_ms"].push_back(timed ? stats::median(status_.samples[i]) : -1.0);
  }
  return j.dump();
}

void StepTuner::decide_together(const std::vector<std::string>& payloads) {
  const std::size_t n = status_.candidates.size();
  std::vector<double> sum(n, 0.0);
  std::vector<bool> timed(n, true);
  std::string differ;
  for (std::size_t r = 0; r < payloads.size() && differ.empty(); ++r) {
    try {
      const auto j = nlohmann::json::parse(payloads[r]);
      const auto labels = j.at("candidates").get<std::vector<std::string>>();
      const auto medians = j.at("median_ms").get<std::vector<double>>();
      bool same = labels.size() == n && medians.size() == n;
      for (std::size_t i = 0; same && i < n; ++i) same = labels[i] == status_.candidates[i].label();
      if (!same) {
        differ = "rank " + std::to_string(r) + " chose between " + text::join(labels, "; ");
        break;
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (medians[i] < 0) timed[i] = false;
        else sum[i] += medians[i];
      }
    } catch (const std::exception& e) {
      differ = "rank " + std::to_string(r) + "'s observation is unreadable (" + e.what() + ")";
    }
  }
  if (!differ.empty()) {
    // Every rank sees the same payloads, so every rank keeps the plan.
    settle(0, "kept the plan: the ranks observed different candidates (" + differ + ")", false);
    return;
  }
  std::vector<double> mean(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) mean[i] = timed[i] ? sum[i] / static_cast<double>(payloads.size()) : 0.0;
  decide_on(mean, timed, "mean over " + std::to_string(payloads.size()) + " ranks");
}

void StepTuner::decide_on(const std::vector<double>& medians, const std::vector<bool>& timed, const std::string& pooled) {
  const std::size_t n = status_.candidates.size();
  status_.median_ms = medians;
  std::vector<std::string> untimed;
  for (std::size_t i = 0; i < n; ++i)
    if (!timed[i] && active_[i]) untimed.push_back(status_.candidates[i].label());  // inactive: raced
  std::ostringstream why;
  if (!timed[0]) {
    why << "kept the plan: after " << observed_steps_
        << " training steps too few were timed (a step's interval is broken by anything run outside a training "
           "scope in between, e.g. an evaluation every few steps)";
    settle(0, why.str(), !pooled.empty());
    return;
  }
  std::size_t chosen = 0;
  std::size_t best = 0;
  for (std::size_t i = 1; i < n; ++i)
    if (timed[i] && status_.median_ms[i] < status_.median_ms[best]) best = i;
  const double plan = status_.median_ms.front();
  if (best != 0 && status_.median_ms[best] <= plan * (1.0 - options_.margin)) {
    chosen = best;
    why << status_.candidates[best].label() << " took " << text::ms_text(status_.median_ms[best])
        << " a step, the plan (" << status_.candidates.front().label() << ") " << text::ms_text(plan) << ": "
        << std::setprecision(3) << plan / status_.median_ms[best] << "x";
  } else {
    why << "the plan (" << status_.candidates.front().label() << ", " << text::ms_text(plan) << " a step) ";
    if (best == 0) why << "was the fastest";
    else
      why << "kept: " << status_.candidates[best].label() << " (" << text::ms_text(status_.median_ms[best])
          << ") is within the " << static_cast<int>(std::lround(options_.margin * 100)) << "% margin";
  }
  why << " (medians of " << options_.rounds << " timed steps each" << (pooled.empty() ? "" : ", " + pooled);
  for (std::size_t i = 0; i < n; ++i)
    if (timed[i]) why << (i ? "; " : ": ") << status_.candidates[i].label() << " " << text::ms_text(status_.median_ms[i]);
  why << ")";
  if (!raced_why_.empty())
    why << "; timed no more once their fastest step was " << std::setprecision(2) << options_.race_factor
        << "x the fastest candidate's median or slower: " << raced_why_;
  if (!untimed.empty())
    why << "; not timed (their turns were interrupted every time): " << text::join(untimed, ", ");
  settle(chosen, why.str(), !pooled.empty());
}

void StepTuner::settle(std::size_t chosen, std::string why, bool pooled) {
  status_.state = StepTuningStatus::State::decided;
  status_.chosen = chosen;
  status_.source = "observed on the program's first " + std::to_string(observed_steps_) + " training steps" +
                   (pooled ? " of each of " + std::to_string(agreement_.world_size) + " ranks" : "");
  status_.why = std::move(why);
  new_decision_ = true;
  ++changes_;
  decision_load_ = load_ ? load_() : -1;  // over the observation (from its first step)
  reset_watch();
}

void StepTuner::adopt(std::size_t index, std::string source, std::string why, double load) {
  if (index >= status_.candidates.size()) throw std::out_of_range("step tuning: no candidate " + std::to_string(index));
  status_.chosen = index;
  status_.source = std::move(source);
  status_.why = std::move(why);
  status_.state = StepTuningStatus::State::decided;
  pending_ = false;
  ++changes_;
  decision_load_ = load;
  if (load_) load_();  // the watch's first window from here
  reset_watch();
}

bool StepTuner::take_new_decision() noexcept {
  const bool fresh = new_decision_;
  new_decision_ = false;
  return fresh;
}

std::string StepTuner::take_watch_note() {
  return std::exchange(watch_note_new_, false) ? status_.last_watch : std::string();
}

namespace {
thread_local int scope_depth = 0;
}  // namespace

AutocastScope::AutocastScope(c10::DeviceType type, bool enabled, at::ScalarType dtype) : guard_(type, enabled, dtype) {
  ++scope_depth;
}

AutocastScope::~AutocastScope() { --scope_depth; }

int AutocastScope::depth() noexcept { return scope_depth; }

}  // namespace accelkit
