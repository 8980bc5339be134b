#include "accelkit/batch_finder.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/optimizer.h>
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include "accelkit/autotune.hpp"
#include "accelkit/device_sync.hpp"
#include "accelkit/memory_scope.hpp"
#include "accelkit/sdk/torch_compat_memory.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/runtime/internals.hpp"
#include "accelkit/decision_cache.hpp"
#include "batch_cache.hpp"
#include "accelkit/runtime/model_snapshot.hpp"

namespace accelkit {
namespace batch_finder {

namespace {

[[noreturn]] void does_not_fit(const BatchSearchOptions& o, const BatchTrial* t, std::uint64_t budget) {
  std::string msg = "the model does not fit at batch " + std::to_string(o.min);
  if (t && t->peak_bytes > 0) msg += ": a step needs " + format_bytes(t->peak_bytes);
  else if (t) msg += " (" + t->note + ")";
  if (budget > 0) msg += (t && t->peak_bytes > 0 ? ", " : "; ") + std::string("the budget is ") + format_bytes(budget);
  throw BatchDoesNotFitError(msg);
}

}  // namespace

BatchDecision search(const std::function<BatchTrial(std::int64_t)>& trial, const BatchSearchOptions& o) {
  if (o.min < 1 || o.max < o.min) throw std::invalid_argument("find_batch_size: need 1 <= min <= max");
  BatchDecision d;
  d.method = "search";
  auto run = [&](std::int64_t b) {
    if (o.trial_starts) o.trial_starts(b);
    d.trials.push_back(trial(b));
    if (o.progress) o.progress(d.trials.back());
    return d.trials.back();
  };
  std::int64_t lo = 0, hi = 0;  // lo fits (0: none yet), hi does not (0: none found)
  std::int64_t b = std::clamp(o.start > 0 ? o.start : o.min, o.min, o.max);
  for (;;) {  // grow
    const BatchTrial t = run(b);
    if (!t.fits) {
      hi = b;
      break;
    }
    lo = b;
    if (b == o.max) break;
    b = std::min(b * 2, o.max);
  }
  if (lo == 0 && hi > o.min) {  // the start did not fit: halve down to a batch that does
    for (b = hi / 2; b >= o.min; b /= 2) {
      const BatchTrial t = run(b);
      if (t.fits) {
        lo = b;
        break;
      }
      hi = b;
      if (b == o.min) break;
    }
    if (lo == 0 && hi > o.min) {
      const BatchTrial t = run(o.min);
      if (t.fits) lo = o.min;
    }
  }
  if (lo == 0) does_not_fit(o, &d.trials.back(), 0);
  // Binary search between lo (fits) and hi (does not), to within 1/16 of lo.
  while (hi > 0 && hi - lo > std::max<std::int64_t>(1, lo / 16)) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (run(mid).fits) lo = mid;
    else hi = mid;
  }
  d.largest = lo;
  for (const BatchTrial& t : d.trials)
    if (t.batch == lo && t.fits) d.memory_at_largest = t.peak_bytes;
  return d;
}

std::int64_t fit(double fixed_bytes, double per_sample_bytes, std::uint64_t budget, const BatchSearchOptions& o) {
  if (o.min < 1 || o.max < o.min) throw std::invalid_argument("find_batch_size: need 1 <= min <= max");
  if (per_sample_bytes <= 0) {  // no growth measured: the fixed part alone decides
    if (fixed_bytes > static_cast<double>(budget)) {
      BatchTrial t;
      t.peak_bytes = static_cast<std::uint64_t>(fixed_bytes);
      does_not_fit(o, &t, budget);
    }
    return o.max;
  }
  const double room = static_cast<double>(budget) - std::max(0.0, fixed_bytes);
  const double largest = std::floor(room / per_sample_bytes);
  if (largest < static_cast<double>(o.min)) {
    BatchTrial t;
    t.peak_bytes = static_cast<std::uint64_t>(std::max(0.0, fixed_bytes) + per_sample_bytes * static_cast<double>(o.min));
    does_not_fit(o, &t, budget);
  }
  return std::min<std::int64_t>(o.max, static_cast<std::int64_t>(largest));
}

namespace {

// A line through (x1, y1) and (x2, y2) in the batch: its value at 0 and its slope (>= 0).
std::pair<double, double> line_through(double x1, double y1, double x2, double y2) {
  const double slope = x2 > x1 ? (y2 - y1) / (x2 - x1) : 0;
  return {y1 - slope * x1, std::max(0.0, slope)};
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 1 ? "%.0f ms" : "%.2f s", s < 1 ? s * 1e3 : s);
  return buf;
}

}  // namespace

namespace {

// The host fit's state: its trials and the two measured points the lines go through.
struct HostFit {
  HostFit(const std::function<BatchTrial(std::int64_t)>& step_fn,
          const std::function<std::uint64_t(std::int64_t)>& backward_peak_fn, const BatchSearchOptions& options,
          std::uint64_t budget_bytes, double limit_s)
      : step(step_fn), backward_peak(backward_peak_fn), o(options), budget(budget_bytes), limit(limit_s) {}

  const std::function<BatchTrial(std::int64_t)>& step;
  const std::function<std::uint64_t(std::int64_t)>& backward_peak;
  const BatchSearchOptions& o;
  std::uint64_t budget;
  double limit;  // seconds; 0: none
  BatchDecision d;
  std::int64_t b1 = 0, b2 = 0;
  BatchTrial t1, t2;

  bool timed() const { return limit > 0; }

  BatchTrial run(std::int64_t b, const char* note, bool record = true) {
    if (o.trial_starts) o.trial_starts(b);
    BatchTrial t = step(b);
    t.note = note;
    if (record) d.trials.push_back(t);
    if (o.progress) o.progress(t);
    return t;
  }

  // Larger batches (x8, then x4) from b1 until the step's memory grows by 16 MiB, passes a
  // quarter of the budget, or its time nears the limit. A step's time grows about linearly with
  // the batch: none is run that would pass the limit (the first growth is made smaller instead,
  // for a second point to fit the lines on).
  void grow() {
    b2 = b1;
    t2 = t1;
    while (b2 < o.max) {
      std::int64_t next = std::min<std::int64_t>(o.max, std::max<std::int64_t>(b2 * (b2 == b1 ? 8 : 4), 8));
      if (timed() && t2.seconds > 0 && t2.seconds * static_cast<double>(next) / static_cast<double>(b2) > limit) {
        if (b2 != b1) break;
        next = std::min(next, static_cast<std::int64_t>(std::floor(static_cast<double>(b1) * 0.5 * limit / t1.seconds)));
        if (next <= b1) break;
      }
      b2 = next;
      t2 = run(b2, "measured");
      if (t2.peak_bytes >= t1.peak_bytes + (std::uint64_t{16} << 20) ||
          backward_peak(b2) >= backward_peak(b1) + (std::uint64_t{16} << 20) || t2.peak_bytes > budget / 4 ||
          (timed() && t2.seconds > limit / 4))
        break;
    }
  }

  // The lines are extrapolated: a step at the answer says what it really takes. The margin the
  // budget leaves covers an extrapolation that was short; one that was, shrinks the batch by
  // what it missed and is measured again. A step up to a quarter over the time limit passes (a
  // step's time is noisy; the limit is a scale, not a contract). Returns what happened, for the
  // decision's text.
  std::string confirm(double memory_fixed) {
    std::string confirmed = "not confirmed", shrunk;
    for (int round = 0; round < 3 && d.largest > b2; ++round) {
      const BatchTrial check = run(d.largest, "at the fitted answer");
      const bool memory_ok = check.peak_bytes <= budget;
      const bool time_ok = !timed() || check.seconds <= 1.25 * limit;
      if (memory_ok && time_ok) {
        d.memory_at_largest = check.peak_bytes;
        confirmed = "confirmed by a step at it (" + seconds_text(check.seconds) + ")";
        break;
      }
      shrunk += "a step at " + std::to_string(d.largest) + " took " + seconds_text(check.seconds) + " and " +
                format_bytes(check.peak_bytes) + (memory_ok ? "" : " (over the budget)") +
                (time_ok ? "" : " (over the limit)") + ", so ";
      double scale = 0.95;
      if (!memory_ok)
        scale = std::min(scale, (static_cast<double>(budget) - memory_fixed) /
                                    (static_cast<double>(check.peak_bytes) - memory_fixed));
      if (!time_ok) scale = std::min(scale, limit / check.seconds);
      d.largest = std::max(b2, static_cast<std::int64_t>(std::floor(static_cast<double>(d.largest) * scale)));
      d.memory_at_largest = 0;
      shrunk += "the batch shrank to " + std::to_string(d.largest) + "; ";
    }
    if (d.memory_at_largest == 0) {  // the last shrink was not measured: b2 was, and fits
      d.largest = b2;
      d.memory_at_largest = t2.peak_bytes;
      confirmed = "the fit overshot; the largest measured batch";
    }
    return shrunk + confirmed;
  }
};

}  // namespace

BatchDecision fit_on_host(const std::function<BatchTrial(std::int64_t)>& step,
                          const std::function<std::uint64_t(std::int64_t)>& backward_peak,
                          const BatchSearchOptions& o, std::uint64_t budget, double limit) {
  if (o.min < 1 || o.max < o.min) throw std::invalid_argument("find_batch_size: need 1 <= min <= max");
  HostFit h(step, backward_peak, o, budget, limit);
  BatchDecision& d = h.d;
  d.method = "fit";
  h.b1 = o.min;
  (void)h.run(h.b1, "warm-up", false);  // the optimizer's state, the allocator's first pages
  h.t1 = h.run(h.b1, "measured");
  if (h.timed() && h.t1.seconds > limit) {  // no smaller batch to go to
    d.largest = h.b1;
    d.memory_at_largest = h.t1.peak_bytes;
    d.why = "a step at the smallest batch, " + std::to_string(h.b1) + ", already takes " + seconds_text(h.t1.seconds) +
            ", more than batch_step_limit (" + seconds_text(limit) + ")";
    return d;
  }
  h.grow();
  // The step's memory is the larger of two lines in the batch: forward + backward (activations
  // on top of the gradients) and the optimizer's step (its state on top of what backward left).
  // At small batches the optimizer's line dominates the step's peak while activations grow
  // faster: each line is fitted from its own peaks, and the batch must fit under both.
  const double x1 = static_cast<double>(h.b1), x2 = static_cast<double>(h.b2);
  const auto [step_fixed, step_slope] =
      line_through(x1, static_cast<double>(h.t1.peak_bytes), x2, static_cast<double>(h.t2.peak_bytes));
  const auto [fb_fixed, fb_slope] =
      line_through(x1, static_cast<double>(backward_peak(h.b1)), x2, static_cast<double>(backward_peak(h.b2)));
  const std::int64_t by_memory = std::min(fit(step_fixed, step_slope, budget, o), fit(fb_fixed, fb_slope, budget, o));
  // The time line; where noise made it flat, time proportional to the batch (which overstates
  // it, so the answer errs small).
  std::int64_t by_time = o.max;
  auto [time_fixed, time_slope] = line_through(x1, h.t1.seconds, x2, h.t2.seconds);
  if (h.timed() && (h.b2 == h.b1 || time_slope <= 0)) time_fixed = 0, time_slope = h.t2.seconds / x2;
  if (h.timed() && time_slope > 0) {
    const double largest = std::floor((limit - std::max(0.0, time_fixed)) / time_slope);
    by_time = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::min(largest, 1e15)), h.b1, o.max);
  }
  d.largest = std::min(by_memory, by_time);
  const double at = static_cast<double>(d.largest);
  d.memory_at_largest = static_cast<std::uint64_t>(
      std::max(std::max(0.0, step_fixed) + step_slope * at, std::max(0.0, fb_fixed) + fb_slope * at));
  const std::string confirmed = h.confirm(std::max(0.0, std::min(step_fixed, fb_fixed)));
  char line[400];
  std::snprintf(line, sizeof line,
                "forward+backward %s per sample over %s, the optimizer's step %s per sample over %s; measured at "
                "batches %lld and %lld",
                format_bytes(static_cast<std::uint64_t>(fb_slope)).c_str(),
                format_bytes(static_cast<std::uint64_t>(std::max(0.0, fb_fixed))).c_str(),
                format_bytes(static_cast<std::uint64_t>(step_slope)).c_str(),
                format_bytes(static_cast<std::uint64_t>(std::max(0.0, step_fixed))).c_str(),
                static_cast<long long>(h.b1), static_cast<long long>(h.b2));
  d.why = line;
  if (h.timed()) {
    d.why += "; a step takes " + seconds_text(h.t2.seconds) + " at batch " + std::to_string(h.b2) +
             (by_time < by_memory ? ": batch_step_limit (" + seconds_text(limit) + " a step) bounds the batch at " +
                                        std::to_string(by_time) + ", memory would allow " + std::to_string(by_memory)
                                  : ", within batch_step_limit (" + seconds_text(limit) + ") up to the memory's bound");
  }
  d.why += "; " + confirmed;
  return d;
}

std::int64_t preset_start(const DeviceInfo& info) {
  for (const auto& [key, value] : info.properties) {
    if (key != "preset batch_size") continue;
    char* end = nullptr;
    errno = 0;
    const long long preset = std::strtoll(value.c_str(), &end, 10);
    if (errno == 0 && end != value.c_str() && *end == '\0' && preset > 0) return preset;
  }
  return 0;
}

void accumulate(BatchDecision& d, std::int64_t target) {
  if (target <= 0 || target <= d.largest) {
    d.batch = target > 0 ? target : d.largest;
    d.accumulation = 1;
  } else {
    d.accumulation = (target + d.largest - 1) / d.largest;
    d.batch = (target + d.accumulation - 1) / d.accumulation;
  }
  d.effective = d.batch * d.accumulation;
}

}  // namespace batch_finder

namespace {

bool is_out_of_memory(const c10::Error& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const std::string what = e.what();
  return what.find("out of memory") != std::string::npos || what.find("Out of memory") != std::string::npos;
}

}  // namespace

namespace {

std::string shape_text(const at::Tensor& t) {
  if (!t.defined()) return "none";
  std::ostringstream out;
  out << t.sizes() << ' ' << t.scalar_type();
  return out.str();
}

// What the step's memory depends on besides the device: the parameters (names, shapes, dtypes),
// the shapes of one sample, the precision, the optimizer's state.
std::string batch_model_signature(const BatchProblem& p, const PrecisionPlan& plan, bool master_weights) {
  std::ostringstream detail;
  std::int64_t elements = 0;
  for (const auto& item : p.model->named_parameters()) {
    detail << item.key() << ' ' << shape_text(item.value()) << ';';
    elements += item.value().numel();
  }
  for (const auto& item : p.model->named_buffers()) detail << item.key() << ' ' << shape_text(item.value()) << ';';
  // One sample's shapes, drawn without moving LibTorch's random stream (the search leaves no
  // trace, the cache path neither).
  at::Tensor input, target;
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    at::Tensor state;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      state = gen.get_state();
    }
    std::tie(input, target) = p.make_batch(1);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }
  std::ostringstream out;
  out << (p.name.empty() ? "model" : p.name) << ": " << elements << " parameters; sample " << shape_text(input) << " -> "
      << shape_text(target) << "; " << (plan.autocast ? to_string(plan.dtype) : "fp32") << (master_weights ? " master weights" : "")
      << "; amsgrad " << (p.adamw.amsgrad ? "on" : "off") << "; #" << decision_cache::hash_hex(detail.str());
  return out.str();
}

}  // namespace

namespace {

// The memory a search may use: what the device has available when it starts, less the
// memory_margin setting's share of its total, or less when the options say so.
struct BatchBudget {
  MemoryStats memory;  // the device's figures when the search starts
  std::uint64_t total = 0;
  int margin = 0;  // percent of the total kept free
  // nullopt: the device says nothing of the memory available (a search then stops at the
  // first out-of-memory error only).
  std::optional<std::uint64_t> bytes;
};

BatchBudget batch_budget(const Runtime& rt, const BatchSearchOptions& o) {
  BatchBudget b;
  b.margin = o.margin_pct >= 0 ? o.margin_pct : *rt.context().config().memory_margin;
  const Result<MemoryStats> before = rt.device_handle()->memory();
  if (!before.ok())
    throw std::runtime_error("find_batch_size: " + rt.device_handle()->info().id + " reports no memory (" +
                             before.status().message() + ")");
  b.memory = before.value();
  const MemoryStats& m = b.memory;
  b.total = m.total.value_or(0);
  if (m.available) {
    const std::uint64_t keep = b.total * static_cast<std::uint64_t>(b.margin) / 100;
    b.bytes = *m.available > keep ? *m.available - keep : 0;
    if (*b.bytes == 0)
      throw BatchDoesNotFitError("no memory left to train in on " + rt.device_handle()->info().id + ": " +
                                 format_bytes(*m.available) + " available, and the memory_margin of " +
                                 std::to_string(b.margin) + "% keeps " + format_bytes(keep) + " of " +
                                 format_bytes(b.total) + " free");
  }
  if (o.memory_budget > 0) b.bytes = b.bytes ? std::min(*b.bytes, o.memory_budget) : o.memory_budget;
  return b;
}

// A decision's cache key: this device, these versions, this model and precision, these
// search options.
struct BatchCacheKey {
  std::string fingerprint;  // the device and the versions
  std::string model;        // batch_model_signature
  std::string key;          // the hash of all of it
  std::string file;         // the entry's path; "" when the cache is not used
};

BatchCacheKey batch_cache_key(Runtime& rt, const BatchProblem& p, const BatchSearchOptions& o, int margin) {
  BatchCacheKey c;
  const bool master = detail::RuntimeInternals::master_weights_asked(rt, p.forwards) && rt.precision().autocast &&
                      rt.precision().dtype == Dtype::bf16;
  c.fingerprint = autotune_device_fingerprint(rt.context()) + "; " + autotune_versions(rt.context());
  c.model = batch_model_signature(p, rt.precision(), master);
  std::ostringstream search_text;
  search_text << "min " << o.min << " max " << o.max << " start " << o.start << " margin " << margin << "% budget "
              << o.memory_budget;
  c.key = decision_cache::hash_hex(c.fingerprint + "\n" + c.model + "\n" + search_text.str());
  if (o.use_cache && *rt.context().config().autotune_cache) {
    const std::string dir = decision_cache_dir();  // "": caching is off, said once for the process
    if (!dir.empty()) c.file = batch_cache::entry_path(dir, c.key);
  }
  return c;
}

// The cached decision, when there is one for this key that still fits the budget of now;
// an entry that cannot be used is said (the search then runs again and rewrites it).
std::optional<BatchDecision> cached_decision(const BatchCacheKey& c, const std::optional<std::uint64_t>& budget) {
  if (c.file.empty()) return std::nullopt;
  std::string problem;
  std::optional<BatchDecision> cached = batch_cache::read_entry(c.file, &problem);
  if (cached && (cached->key != c.key || cached->fingerprint != c.fingerprint || cached->model != c.model))
    problem = "it was written for another device, version or model (a key collision)";
  else if (cached && budget && cached->memory_at_largest > *budget)
    problem = "its largest batch needed " + format_bytes(cached->memory_at_largest) + ", the budget is now " +
              format_bytes(*budget);
  if (cached && problem.empty()) return cached;
  if (!problem.empty()) spdlog::warn("find_batch_size: not using {}: {}; searching again", c.file, problem);
  return std::nullopt;
}

// The batch and accumulation steps for the target, recorded as the runtime's batch_size decision.
void adopt_decision(Runtime& rt, BatchDecision& d, std::int64_t target_effective_batch, const std::string& source) {
  batch_finder::accumulate(d, target_effective_batch);
  if (d.accumulation > 1)
    d.why += "; batch " + std::to_string(d.batch) + " x " + std::to_string(d.accumulation) +
             " accumulation steps = " + std::to_string(d.effective);
  detail::RuntimeInternals::decide(rt, "batch_size",
                                   d.accumulation > 1 ? std::to_string(d.batch) + " x " + std::to_string(d.accumulation) +
                                                            " accumulation steps"
                                                      : std::to_string(d.batch),
                                   source, d.why);
}

// One training step at a batch, measured: its peak in use above what was in use before the
// search, and the time of its forward and backward. The model is put back before and after.
class BatchTrialStep {
 public:
  // search: a GPU-like device that counts its allocator (else the host's tensor bytes).
  BatchTrialStep(Runtime& rt, const BatchProblem& p, ModelSnapshot& snapshot, bool search,
                 std::uint64_t in_use_before, std::optional<std::uint64_t> budget)
      : rt_(rt), p_(p), snapshot_(snapshot), search_(search), in_use_before_(in_use_before), budget_(budget) {}

  BatchTrial run(std::int64_t batch) {
    BatchTrial t;
    t.batch = batch;
    snapshot_.restore(false);
    try {
      measure(t);
      t.fits = !budget_ || t.peak_bytes <= *budget_;
      t.note = t.fits ? "fits" : "the step's peak " + format_bytes(t.peak_bytes) + " passes the budget " + format_bytes(*budget_);
    } catch (const c10::Error& e) {
      if (!is_out_of_memory(e)) throw;
      t.fits = false;
      t.note = "out of memory";
    }
    snapshot_.restore(false);
    p_.model->zero_grad();
    (void)rt_.device_handle()->empty_cache();
    return t;
  }

  // The host's trials: the peak up to backward's end at `batch`.
  std::uint64_t backward_peak(std::int64_t batch) { return backward_peaks_[batch]; }

 private:
  // A GPU: the device's own allocator figures. The host: the tensor bytes the step allocates
  // (LibTorch's memory reporting), exact where the resident set misses reused free memory.
  void measure(BatchTrial& t) {
    std::optional<MemoryScope> scope;
    std::optional<compat::TensorMemoryMeter> meter;
    if (search_) scope.emplace(rt_.device_handle(), "batch " + std::to_string(t.batch));
    else meter.emplace(rt_.device().type());
    train_once(t, meter ? &*meter : nullptr);
    if (scope) {
      const MemoryReport r = scope->stop();
      t.peak_bytes = r.peak > in_use_before_ ? r.peak - in_use_before_ : r.peak_over_start();
    } else {
      t.peak_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(0, meter->peak()));
    }
  }

  void forward_backward(const at::Tensor& input, const at::Tensor& target) {
    at::Tensor out;
    {
      auto ac = detail::RuntimeInternals::plan_autocast(rt_);
      out = p_.forward(input);
    }
    p_.loss(out.to(at::kFloat), target).backward();
  }

  // The step itself: a batch, the optimizer, forward and backward (timed), the optimizer's step.
  void train_once(BatchTrial& t, const compat::TensorMemoryMeter* meter) {
    auto [input, target] = p_.make_batch(t.batch);
    OptimizerChoice opt = rt_.make_adamw(p_.model->parameters(), p_.adamw, /*model_weights=*/true, p_.forwards);
    zero_grad(*opt.optimizer);
    // On the host, the forward and backward are timed (the part of a step that grows with the
    // batch; a trial's optimizer step is its first, which allocates the optimizer's state), on
    // a second pass: the first pays for what a running program's steps have done already
    // (the allocator's first pages, the weights' first casts). Its gradients accumulate into
    // the first's, in place.
    if (!search_) forward_backward(input, target);
    detail::synchronize(rt_.device());
    const auto started = std::chrono::steady_clock::now();
    forward_backward(input, target);
    detail::synchronize(rt_.device());
    t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // The forward and backward's own peak (activations, gradients), before the optimizer's
    // state joins: the two phases grow with the batch at different rates.
    if (meter) backward_peaks_[t.batch] = static_cast<std::uint64_t>(std::max<std::int64_t>(0, meter->peak()));
    opt.optimizer->step();
    detail::synchronize(rt_.device());
  }

  Runtime& rt_;
  const BatchProblem& p_;
  ModelSnapshot& snapshot_;
  const bool search_;
  const std::uint64_t in_use_before_;
  const std::optional<std::uint64_t> budget_;
  std::map<std::int64_t, std::uint64_t> backward_peaks_;
};

// The host's fit. The process's memory is the host's: a step that does not fit meets the OOM
// killer. The gradients and AdamW's two moments (the parameters are in memory already) are
// needed at any batch: refuse before a step when they alone pass the budget.
BatchDecision fit_batch_on_host(const Runtime& rt, const BatchProblem& p, const BatchSearchOptions& o,
                                const std::optional<std::uint64_t>& budget, BatchTrialStep& step) {
  if (!budget) throw std::runtime_error("find_batch_size: " + rt.device_handle()->info().id + " reports no available memory");
  std::uint64_t param_bytes = 0;
  for (const auto& t : p.model->parameters())
    param_bytes += static_cast<std::uint64_t>(t.numel()) * static_cast<std::uint64_t>(t.element_size());
  if (3 * param_bytes > *budget) {
    throw BatchDoesNotFitError("the model does not fit at any batch: its gradients and AdamW's two moments "
                               "alone need " + format_bytes(3 * param_bytes) +
                               ", the budget is " + format_bytes(*budget) + " (no step was run)");
  }
  const double limit = o.max_step_seconds >= 0 ? o.max_step_seconds : *rt.context().config().batch_step_limit;
  return batch_finder::fit_on_host([&step](std::int64_t b) { return step.run(b); },
                                   [&step](std::int64_t b) { return step.backward_peak(b); }, o, *budget, limit);
}

// What the device had, for a batch that does not fit ("" when it says nothing of it): the
// search's own message names what the step needed.
std::string memory_the_device_had(const Runtime& rt, const BatchBudget& b) {
  const MemoryStats& m = b.memory;
  std::string had = m.available ? format_bytes(*m.available) + " available on " + rt.device_handle()->info().id : std::string();
  if (m.available && b.total > 0) had += " (memory_margin " + std::to_string(b.margin) + "% of " + format_bytes(b.total) + ")";
  return had;
}

// The trials: a search where the device counts its allocator (a GPU: trials may run out of
// memory safely), else the host's fit of small measurements that never run out of memory.
// The model, its buffers and the random state are put back whatever happens.
BatchDecision run_batch_trials(Runtime& rt, const BatchProblem& p, const BatchSearchOptions& o, const BatchBudget& b) {
  const bool search = b.memory.reserved.has_value();
  ModelSnapshot snapshot(*p.model, /*on_host=*/search);
  BatchTrialStep step(rt, p, snapshot, search, b.memory.in_use.value_or(0), b.bytes);
  BatchDecision d;
  try {
    if (search) d = batch_finder::search([&step](std::int64_t batch) { return step.run(batch); }, o);
    else d = fit_batch_on_host(rt, p, o, b.bytes, step);
  } catch (const BatchDoesNotFitError& e) {
    snapshot.restore(true);
    const std::string had = memory_the_device_had(rt, b);
    throw BatchDoesNotFitError(std::string(e.what()) + (had.empty() ? "" : "; " + had));
  } catch (...) {
    snapshot.restore(true);
    throw;
  }
  snapshot.restore(true);
  return d;
}

// The decision's record (where and for which key it was measured) and its line for people.
void describe_decision(const Runtime& rt, BatchDecision& d, const BatchProblem& p, const BatchSearchOptions& o,
                       const BatchBudget& b, const BatchCacheKey& c) {
  const std::optional<std::uint64_t>& budget = b.bytes;
  d.device = rt.device_handle()->info().id;
  d.budget = budget.value_or(0);
  d.margin_pct = b.margin;
  d.key = c.key;
  d.fingerprint = c.fingerprint;
  d.model = c.model;
  d.created = decision_cache::utc_now();
  const std::string budget_text =
      !budget ? "no budget: " + rt.device_handle()->info().id + " reports no memory available, the search stops at out-of-memory"
      : o.memory_budget > 0 && *budget == o.memory_budget
          ? "budget " + format_bytes(*budget) + " (asked for)"
          : "budget " + format_bytes(*budget) + " = available less " + std::to_string(b.margin) + "% of " + format_bytes(b.total);
  d.why = (p.name.empty() ? std::string() : p.name + ": ") + "largest batch " + std::to_string(d.largest) + " (" +
          format_bytes(d.memory_at_largest) + " at it, " + budget_text + ")" +
          (d.method == "fit" ? "; fitted: " + d.why : "; searched: " + std::to_string(d.trials.size()) + " trial steps");
}

// Writes the decision to its cache entry (when the cache is used); a failure is only warned of.
void store_decision(BatchDecision& d, const std::string& cache_file) {
  if (cache_file.empty()) return;
  try {
    batch_cache::write_entry(cache_file, d);
    d.cache_file = cache_file;
  } catch (const std::exception& e) {
    spdlog::warn("find_batch_size: cannot write the cache entry {}: {}", cache_file, e.what());
  }
}

}  // namespace

BatchDecision find_batch_size(Runtime& rt, const BatchProblem& p, const BatchSearchOptions& options) {
  if (!p.model || !p.forward || !p.loss || !p.make_batch)
    throw std::invalid_argument("find_batch_size: the problem needs a model, forward, loss and make_batch");
  BatchSearchOptions o = options;
  if (o.min < 1 || o.max < o.min) throw std::invalid_argument("find_batch_size: need 1 <= min <= max");
  // A plugin's preset for this card (the ROCm plugin's presets.toml) is where the search starts,
  // not its answer.
  if (o.start == 0) o.start = batch_finder::preset_start(rt.device_handle()->info());
  const BatchBudget budget = batch_budget(rt, o);
  const BatchCacheKey cache = batch_cache_key(rt, p, o, budget.margin);
  if (std::optional<BatchDecision> cached = cached_decision(cache, budget.bytes)) {
    adopt_decision(rt, *cached, o.target_effective_batch, "batch finder cache " + cache.file);
    return *cached;
  }
  BatchDecision d = run_batch_trials(rt, p, o, budget);
  describe_decision(rt, d, p, o, budget, cache);
  batch_finder::accumulate(d, o.target_effective_batch);
  store_decision(d, cache.file);
  adopt_decision(rt, d, o.target_effective_batch, d.method == "fit" ? "batch finder (fitted)" : "batch finder (searched)");
  spdlog::info("find_batch_size: {}", d.why);
  return d;
}

}  // namespace accelkit
