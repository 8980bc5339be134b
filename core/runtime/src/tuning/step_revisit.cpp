// Revisiting a step-tuning decision (step_tuning.hpp): the watch over windows of training steps
// (their median interval, other processes' load), and the re-observation that follows a
// sustained change. The first observation is step_tuning.cpp's.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "accelkit/base/median.hpp"
#include "accelkit/base/strings.hpp"
#include "accelkit/step_tuning.hpp"

namespace accelkit {

void StepTuner::reset_watch() {
  window_open_ = false;
  have_last_step_ = false;
  intervals_.clear();
  next_check_ = 0;
  reset_drift();
  windows_since_ = 0;
  ref_ms_ = 0;
  ref_intervals_.clear();
}

void StepTuner::reset_drift() {
  drift_ = 0;
  drift_load_ = drift_ms_ = drift_wall_ = 0;
}

void StepTuner::stop_revisiting(std::string why) {
  status_.no_revisit = std::move(why);
  if (!status_.reobserving) return;
  status_.reobserving = false;  // the standing choice stays
  active_.assign(status_.candidates.size(), true);
  status_.why = standing_why_;
  pending_ = false;
  ++changes_;
}

void StepTuner::watch(bool training) {
  if (!status_.no_revisit.empty()) return;
  if (!training) {  // an evaluation: its time is no training step's
    have_last_step_ = false;
    return;
  }
  const double now = clock_();
  if (!window_open_) {
    window_open_ = true;
    window_start_ = now;
  } else if (have_last_step_) {
    intervals_.push_back(now - last_step_at_);
  }
  have_last_step_ = true;
  last_step_at_ = now;
  // A window closes once it holds watch_steps intervals and watch_ms of the steps' own time,
  // their median times their count: an interval that spans other work of the program (another
  // model's epoch, an evaluation) counts as one step. The median is taken when the count
  // reaches what the last one said is needed, a few times a window.
  const auto n = static_cast<int>(intervals_.size());
  if (n < std::max(options_.watch_steps, next_check_)) return;
  const double ms = stats::median(intervals_);
  if (ms * n >= options_.watch_ms) {
    next_check_ = 0;
    close_window(now, ms);
  } else {
    next_check_ = ms > 0 ? std::max(n + 1, static_cast<int>(std::ceil(options_.watch_ms / ms))) : n + 1;
  }
}

void StepTuner::close_window(double now, double ms) {
  // The step's reference: the median of every interval of the first sustain_windows windows
  // under the decision, measured as the watch measures (every interval, where the observation
  // timed one step per turn: a program whose scopes are not one per step times differently).
  const bool reference = ref_ms_ <= 0;
  if (reference) {
    ref_intervals_.insert(ref_intervals_.end(), intervals_.begin(), intervals_.end());
    if (windows_since_ + 1 >= options_.sustain_windows) ref_ms_ = stats::median(ref_intervals_);
  }
  intervals_.clear();
  const double wall = now - window_start_;
  window_start_ = now;
  const double load = load_ ? load_() : -1;
  ++windows_since_;
  bool moved = false;
  if (load >= 0) {
    if (decision_load_ < 0) decision_load_ = load;  // unknown when decided: this window's is the reference
    else moved = load_moved(load) != 0;
  }
  if (!reference) moved = moved || std::abs(ms / ref_ms_ - 1.0) >= options_.time_change;
  if (!moved) return reset_drift();
  ++drift_;
  drift_load_ += load;
  drift_ms_ += ms;
  drift_wall_ += wall;
  if (drift_ < options_.sustain_windows || windows_since_ < gap_) return;
  const double load_then = drift_load_ / drift_;
  const double ms_then = drift_ms_ / drift_;
  const std::string reason = revisit_reason(load_then, ms_then);
  const std::size_t n = status_.candidates.size();
  // Where the load is not read, the time alone says something changed: every candidate again.
  if (load < 0 || decision_load_ < 0) return begin_reobservation(reason, std::vector<bool>(n, true));
  const int direction = load_moved(load_then);
  std::vector<bool> which = favoured(direction);
  if (direction == 0 || std::count(which.begin(), which.end(), true) < 2)
    return retake_reference(load_then, ms_then, reason, direction);
  begin_reobservation(reason, std::move(which));
}

int StepTuner::load_moved(double load) const {
  const double by = load - decision_load_;
  if (by >= options_.load_change) return 1;
  // A fall of load_change cores, or to half the decision's load: a choice made while others kept
  // half a core busy (0.48 cores over a DCGAN's observation: 1 thread kept, 149 ms a step against
  // 80 at 2 threads once they stopped) is not trusted once they stop. Not below load_fall_min
  // cores, so noise around a quiet decision never counts.
  const double fall = std::min(options_.load_change, std::max(options_.load_fall_min, decision_load_ / 2));
  return -by >= fall ? -1 : 0;
}

std::vector<bool> StepTuner::favoured(int direction) const {
  const std::size_t n = status_.candidates.size();
  const int standing = status_.candidates[status_.chosen].threads;
  std::vector<bool> which(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const int t = status_.candidates[i].threads;
    which[i] = i == status_.chosen || (direction < 0 && t > standing) || (direction > 0 && t < standing);
  }
  return which;
}

void StepTuner::retake_reference(double load, double ms, const std::string& reason, int direction) {
  const std::string standing = status_.candidates[status_.chosen].label();
  std::ostringstream note;
  note.setf(std::ios::fixed);
  note.precision(2);
  note << reason << ": ";
  if (direction == 0) {
    note << "other processes' load is as it was, so no other candidate is favoured; " << standing
         << " stands, and " << text::ms_text(ms) << " is the step's reference from here";
  } else {
    note << standing << " already runs the " << (direction < 0 ? "most" : "fewest")
         << " threads of the candidates, so it stands; " << load << " cores is the load's reference from here";
  }
  decision_load_ = load;
  if (ms > 0) ref_ms_ = ms;
  reset_drift();
  status_.last_watch = note.str();
  watch_note_new_ = true;
  ++changes_;
}

std::string StepTuner::revisit_reason(double load, double ms) const {
  std::ostringstream r;
  r.setf(std::ios::fixed);
  r.precision(2);
  r << "over the last " << drift_ << " windows (" << std::setprecision(1) << drift_wall_ / 1000.0 << " s) ";
  r.precision(2);
  if (load >= 0 && decision_load_ >= 0)
    r << "other processes kept " << load << " cores busy (" << decision_load_ << " when it was decided), ";
  r << "a step took " << text::ms_text(ms);
  if (ref_ms_ > 0) r << " (" << text::ms_text(ref_ms_) << " in its first windows)";
  return r.str();
}

void StepTuner::begin_reobservation(const std::string& reason, std::vector<bool> which) {
  status_.reobserving = true;
  active_ = std::move(which);
  reason_ = reason;
  standing_why_ = status_.why;
  status_.samples.assign(status_.candidates.size(), {});
  obs_warmup_ = 0;  // the allocator and caches are warm by now
  obs_rounds_ = options_.revisit_rounds;
  round_ = 0;
  turn_step_ = 0;
  pending_ = false;
  last_threads_ = status_.candidates[status_.chosen].threads;
  obs_first_step_ = training_steps_ + 1;  // from the next training step
  if (load_) load_();                      // the re-observation's load from here
  start_round();
  status_.why = observing_why();
  ++changes_;
}

void StepTuner::redecide() {
  const std::size_t n = status_.candidates.size();
  const std::size_t had = status_.chosen;
  std::vector<double> medians(n, 0.0);
  std::vector<bool> timed(n);
  std::vector<std::string> left;  // not re-timed: the change cannot favour them
  for (std::size_t i = 0; i < n; ++i) {
    timed[i] = active_[i] && static_cast<int>(status_.samples[i].size()) >= obs_rounds_;
    if (active_[i] && !status_.samples[i].empty()) medians[i] = stats::median(status_.samples[i]);
    else if (!active_[i] && i < status_.median_ms.size()) medians[i] = status_.median_ms[i];  // the last timing's
    if (!active_[i]) left.push_back(status_.candidates[i].label());
  }
  std::ostringstream why;
  why << "revisited (" << reason_ << "): had " << status_.candidates[had].label() << "; ";
  std::size_t best = had;
  for (std::size_t i = 0; i < n; ++i)
    if (timed[i] && (!timed[best] || medians[i] < medians[best])) best = i;
  if (!timed[had]) {
    why << "kept it: too few of its steps were timed";
  } else if (best != had && medians[best] <= medians[had] * (1.0 - options_.revisit_margin)) {
    why << "chose " << status_.candidates[best].label() << ": " << text::ms_text(medians[best]) << " a step against "
        << text::ms_text(medians[had]) << ", " << std::setprecision(3) << medians[had] / medians[best] << "x";
    status_.chosen = best;
  } else {
    why << "kept it: ";
    if (best == had) why << "still the fastest";
    else
      why << status_.candidates[best].label() << " is within the " << std::lround(options_.revisit_margin * 100)
          << "% margin";
  }
  why << " (medians of " << obs_rounds_ << " timed steps each";
  const char* sep = ": ";
  for (std::size_t i = 0; i < n; ++i)
    if (timed[i]) {
      why << sep << status_.candidates[i].label() << " " << text::ms_text(medians[i]);
      sep = "; ";
    }
  why << ")";
  if (!left.empty()) why << "; not re-timed, as the change cannot favour them: " << text::join(left, "; ");
  status_.median_ms = medians;
  active_.assign(n, true);
  status_.why = why.str();
  status_.last_revisit = status_.why;
  status_.source = "re-observed on the program's training steps " + std::to_string(obs_first_step_) + "-" +
                   std::to_string(training_steps_ - 1) + " (revisit " + std::to_string(status_.redecisions + 1) + ")";
  ++status_.redecisions;
  status_.reobserving = false;
  new_decision_ = true;
  ++changes_;
  decision_load_ = load_ ? load_() : -1;  // over the re-observation
  reset_watch();
  gap_ = gap_ == 0 ? options_.gap_windows : std::min(gap_ * 2, options_.max_gap_windows);
}

}  // namespace accelkit
