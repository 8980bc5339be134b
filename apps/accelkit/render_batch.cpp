#include "render_batch.hpp"

#include <string>
#include <vector>

#include "accelkit/autotune.hpp"
#include "accelkit/memory_scope.hpp"
#include "table.hpp"

namespace accelkit::cli {

namespace {

std::string batch_text(const BatchDecision& d) {
  if (d.accumulation <= 1) return std::to_string(d.batch);
  return std::to_string(d.batch) + " x " + std::to_string(d.accumulation) + " accumulation steps = " +
         std::to_string(d.effective);
}

struct BatchCacheView {
  std::string dir;
  bool enabled = false;
  std::vector<BatchDecision> here, corrupt;
  int elsewhere = 0;
};

BatchCacheView batch_cache_view(const Context& ctx) {
  BatchCacheView v;
  v.dir = decision_cache_dir();
  v.enabled = *ctx.config().autotune_cache && !v.dir.empty();
  if (v.dir.empty()) return v;
  const std::string fingerprint = autotune_device_fingerprint(ctx) + "; " + autotune_versions(ctx);
  for (BatchDecision& d : list_batch_cache(v.dir)) {
    if (d.origin == "corrupt") v.corrupt.push_back(std::move(d));
    else if (d.fingerprint == fingerprint) v.here.push_back(std::move(d));
    else ++v.elsewhere;
  }
  return v;
}

}  // namespace

std::string batch_trial_line(const BatchTrial& t) {
  return "batch " + std::to_string(t.batch) + ": " + (t.fits ? "fits" : "does not fit") +
         (t.peak_bytes > 0 ? ", step peak " + format_bytes(t.peak_bytes) : std::string()) +
         (t.note.empty() || t.note == "fits" ? std::string() : " (" + t.note + ")");
}

void render_batch_decision(std::ostream& out, const BatchDecision& d) {
  out << "Batch size: " << batch_text(d) << " ("
      << (d.origin == "cache" ? "batch finder cache " + d.cache_file : "batch finder, measured now") << ")\n  " << d.why
      << '\n';
  if (d.origin == "cache" || d.trials.empty()) return;
  Table t({"BATCH", "FITS", "STEP PEAK", "NOTE"});
  t.right_align(0).right_align(2);
  for (const BatchTrial& tr : d.trials)
    t.add_row({std::to_string(tr.batch), tr.fits ? "yes" : "no", tr.peak_bytes ? format_bytes(tr.peak_bytes) : "-", tr.note});
  t.print(out);
}

Json batch_decision_json(const BatchDecision& d) {
  Json trials = Json::array();
  for (const BatchTrial& t : d.trials)
    trials.push_back(Json{{"batch", t.batch}, {"fits", t.fits}, {"peak_bytes", t.peak_bytes}, {"note", t.note}});
  return Json{{"batch", d.batch},
              {"accumulation", d.accumulation},
              {"effective", d.effective},
              {"largest", d.largest},
              {"memory_at_largest_bytes", d.memory_at_largest},
              {"budget_bytes", d.budget},
              {"margin_pct", d.margin_pct},
              {"method", d.method},
              {"origin", d.origin},
              {"cache_file", d.cache_file.empty() ? Json(nullptr) : Json(d.cache_file)},
              {"device", d.device},
              {"model", d.model},
              {"created", d.created},
              {"why", d.why},
              {"trials", std::move(trials)}};
}

void render_batch_cache(std::ostream& out, const Context& ctx) {
  const BatchCacheView v = batch_cache_view(ctx);
  out << "Batch-size finder: cache " << (v.dir.empty() ? "(no directory: set ACCELKIT_CACHE_DIR)" : v.dir)
      << (v.enabled || v.dir.empty() ? "" : " - not used (--no-cache / autotune_cache = false)") << "; memory_margin "
      << *ctx.config().memory_margin << "% (" << ctx.config().memory_margin.from() << ")\n";
  if (v.here.empty()) {
    out << "  no cached decisions for this device and these versions (bench or train --batch auto makes one)\n";
  } else {
    Table t({"MODEL", "LARGEST", "MEMORY AT IT", "BUDGET", "MEASURED", "WHY"});
    for (const auto& d : v.here)
      t.add_row({d.model, std::to_string(d.largest), format_bytes(d.memory_at_largest),
                 d.budget ? format_bytes(d.budget) + " (margin " + std::to_string(d.margin_pct) + "%)" : "none",
                 d.created, d.why});
    t.print(out);
  }
  if (v.elsewhere)
    out << "  (" << v.elsewhere << " cached decision" << (v.elsewhere == 1 ? "" : "s")
        << " for other devices or versions)\n";
  for (const auto& d : v.corrupt)
    out << "  unreadable entry " << d.cache_file << ": " << d.why << " (it is rewritten when that model is sized again)\n";
}

Json batch_cache_json(const Context& ctx) {
  const BatchCacheView v = batch_cache_view(ctx);
  Json here = Json::array(), corrupt = Json::array();
  for (const auto& d : v.here) here.push_back(batch_decision_json(d));
  for (const auto& d : v.corrupt) corrupt.push_back(Json{{"cache_file", d.cache_file}, {"why", d.why}});
  return Json{{"cache_dir", v.dir.empty() ? Json(nullptr) : Json(v.dir)},
              {"cache_used", v.enabled},
              {"memory_margin_pct", *ctx.config().memory_margin},
              {"decisions", std::move(here)},
              {"other_entries", v.elsewhere},
              {"corrupt", std::move(corrupt)}};
}

}  // namespace accelkit::cli
