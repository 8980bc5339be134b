#include "accelkit/batch_finder.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include "accelkit/device_sync.hpp"
#include "accelkit/memory_scope.hpp"
#include "accelkit/runtime.hpp"
#include "model_snapshot.hpp"

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
  if (per_sample_bytes <= 0) return o.max;
  const double room = static_cast<double>(budget) - std::max(0.0, fixed_bytes);
  const double largest = std::floor(room / per_sample_bytes);
  if (largest < static_cast<double>(o.min)) {
    BatchTrial t;
    t.peak_bytes = static_cast<std::uint64_t>(std::max(0.0, fixed_bytes) + per_sample_bytes * static_cast<double>(o.min));
    does_not_fit(o, &t, budget);
  }
  return std::min<std::int64_t>(o.max, static_cast<std::int64_t>(largest));
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

BatchDecision Runtime::find_batch_size(const BatchProblem& p, const BatchSearchOptions& options) {
  if (!p.model || !p.forward || !p.loss || !p.make_batch)
    throw std::invalid_argument("find_batch_size: the problem needs a model, forward, loss and make_batch");
  BatchSearchOptions o = options;
  const int margin = o.margin_pct >= 0 ? o.margin_pct : *context_->config().memory_margin;
  const Result<MemoryStats> before = device_->memory();
  if (!before.ok())
    throw std::runtime_error("find_batch_size: " + device_->info().id + " reports no memory (" +
                             before.status().message() + ")");
  const MemoryStats& m = before.value();
  const std::uint64_t total = m.total.value_or(0);
  std::uint64_t budget = 0;
  if (m.available) {
    const std::uint64_t keep = total * static_cast<std::uint64_t>(margin) / 100;
    budget = *m.available > keep ? *m.available - keep : 0;
  }
  if (o.memory_budget > 0) budget = budget > 0 ? std::min(budget, o.memory_budget) : o.memory_budget;
  // A GPU-like device counts its allocator: trials may run out of memory safely. Otherwise the
  // figures are the process's (the CPU): fit small measurements, never run out of memory.
  const bool search = m.reserved.has_value();

  ModelSnapshot snapshot(*p.model, /*on_host=*/search);
  const std::uint64_t in_use_before = m.in_use.value_or(0);
  // One training step at `batch`: its peak in use above what was in use before the search.
  auto step = [&](std::int64_t batch) -> BatchTrial {
    BatchTrial t;
    t.batch = batch;
    snapshot.restore(false);
    try {
      MemoryScope scope(device_, "batch " + std::to_string(batch));
      {
        auto [input, target] = p.make_batch(batch);
        OptimizerChoice opt = make_adamw(p.model->parameters(), p.adamw);
        zero_grad(*opt.optimizer);
        at::Tensor out;
        {
          auto ac = autocast();
          out = p.forward(input);
        }
        at::Tensor loss = p.loss(out.to(at::kFloat), target);
        loss.backward();
        opt.optimizer->step();
        detail::synchronize(torch_device_);
      }
      const MemoryReport r = scope.stop();
      t.peak_bytes = r.peak > in_use_before ? r.peak - in_use_before : r.peak_over_start();
      t.fits = budget == 0 || t.peak_bytes <= budget;
      t.note = t.fits ? "fits" : "the step's peak " + format_bytes(t.peak_bytes) + " passes the budget " + format_bytes(budget);
    } catch (const c10::Error& e) {
      if (!is_out_of_memory(e)) throw;
      t.fits = false;
      t.note = "out of memory";
    }
    snapshot.restore(false);
    p.model->zero_grad();
    (void)device_->empty_cache();
    return t;
  };

  BatchDecision d;
  try {
    if (search) {
      d = batch_finder::search(step, o);
    } else {
      // Two small measurements after a warm step (the optimizer's state, the allocator's first
      // pages): the per-sample growth between them, fitted into the budget.
      // The second batch grows (x4) until the step's memory grows by 16 MiB over the first (a
      // growth well above the allocator's page and cache granularity), never past a quarter of
      // the budget.
      const std::int64_t b1 = std::max<std::int64_t>(o.min, 1);
      (void)step(b1);
      BatchTrial t1 = step(b1);
      t1.note = "measured";
      d.trials = {t1};
      if (o.progress) o.progress(t1);
      std::int64_t b2 = b1;
      BatchTrial t2 = t1;
      while (b2 < o.max) {
        b2 = std::min<std::int64_t>(o.max, std::max<std::int64_t>(b2 * (b2 == b1 ? 8 : 4), 8));
        t2 = step(b2);
        t2.note = "measured";
        d.trials.push_back(t2);
        if (o.progress) o.progress(t2);
        if (t2.peak_bytes >= t1.peak_bytes + (std::uint64_t{16} << 20) || (budget > 0 && t2.peak_bytes > budget / 4)) break;
      }
      const double per_sample = b2 > b1 ? (static_cast<double>(t2.peak_bytes) - static_cast<double>(t1.peak_bytes)) /
                                              static_cast<double>(b2 - b1)
                                        : 0;
      const double fixed = static_cast<double>(t1.peak_bytes) - per_sample * static_cast<double>(b1);
      d.method = "fit";
      if (budget == 0) throw std::runtime_error("find_batch_size: " + device_->info().id + " reports no available memory");
      d.largest = batch_finder::fit(fixed, per_sample, budget, o);
      d.memory_at_largest = static_cast<std::uint64_t>(std::max(0.0, fixed) + std::max(0.0, per_sample) * static_cast<double>(d.largest));
      char line[160];
      std::snprintf(line, sizeof line, "%s per sample, %s fixed, measured at batches %lld and %lld",
                    format_bytes(static_cast<std::uint64_t>(std::max(0.0, per_sample))).c_str(),
                    format_bytes(static_cast<std::uint64_t>(std::max(0.0, fixed))).c_str(), static_cast<long long>(b1),
                    static_cast<long long>(b2));
      d.why = line;
    }
  } catch (...) {
    snapshot.restore(true);
    throw;
  }
  snapshot.restore(true);
  d.device = device_->info().id;
  d.budget = budget;
  d.margin_pct = margin;
  batch_finder::accumulate(d, o.target_effective_batch);
  const std::string head = (p.name.empty() ? std::string() : p.name + ": ") + "largest batch " +
                           std::to_string(d.largest) + " (" + format_bytes(d.memory_at_largest) + " at it, budget " +
                           format_bytes(budget) + " = available less " + std::to_string(margin) + "% of " +
                           format_bytes(total) + ")";
  d.why = head + (d.method == "fit" ? "; fitted: " + d.why
                                    : "; searched: " + std::to_string(d.trials.size()) + " trial steps") +
          (d.accumulation > 1 ? "; batch " + std::to_string(d.batch) + " x " + std::to_string(d.accumulation) +
                                    " accumulation steps = " + std::to_string(d.effective)
                              : "");
  spdlog::info("find_batch_size: {}", d.why);
  return d;
}

}  // namespace accelkit
