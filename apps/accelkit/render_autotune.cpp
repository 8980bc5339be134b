#include "render_autotune.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "accelkit/context.hpp"
#include "table.hpp"

namespace accelkit::cli {
namespace {

std::string num(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  std::ostringstream s;
  s << std::setprecision(digits) << v;
  return s.str();
}

Json candidate_json(const TuneCandidate& c) {
  return Json{{"precision", to_string(c.precision)}, {"fused_optimizer", c.fused ? "on" : "off"}, {"threads", c.threads}};
}

struct CacheView {
  std::string dir;
  bool enabled = false;
  std::vector<TuneDecision> here;     // this device and versions
  std::vector<TuneDecision> corrupt;
  std::size_t elsewhere = 0;          // other devices or versions
};

CacheView cache_view(const Context& ctx) {
  CacheView v;
  v.enabled = *ctx.config().autotune_cache;
  v.dir = decision_cache_dir();
  if (!ctx.decision().ok) return v;
  const std::string device = autotune_device_fingerprint(ctx);
  const std::string versions = autotune_versions(ctx);
  for (auto& d : list_autotune_cache(v.dir)) {
    if (d.origin == "corrupt") v.corrupt.push_back(std::move(d));
    else if (d.device == device && d.versions == versions) v.here.push_back(std::move(d));
    else ++v.elsewhere;
  }
  return v;
}

}  // namespace

void render_autotune(std::ostream& out, const TuneDecision& d) {
  out << "auto-tune: " << d.chosen.label() << " (from " << d.origin;
  if (!d.cache_file.empty()) out << (d.origin == "cache" ? " " : "; saved to ") << d.cache_file;
  out << ")\n  why: " << d.why << '\n';
  if (d.trials.empty()) {
    if (d.origin == "cache") out << "  tuned " << d.created << "; run with --no-cache to time the candidates again\n";
    return;
  }
  Table t({"candidate", "ms/step", "loss vs fp32", "result"});
  t.right_align(1);
  t.right_align(2);
  for (const TuneTrial& tr : d.trials)
    t.add_row({tr.candidate.label() + (tr.reference ? " (reference)" : ""), num(tr.median_ms, 4),
               num(tr.rel_diff, 2), tr.note});
  t.print(out);
}

Json autotune_json(const TuneDecision& d) {
  Json trials = Json::array();
  for (const TuneTrial& t : d.trials) {
    Json j = candidate_json(t.candidate);
    j["reference"] = t.reference;
    j["median_ms"] = t.median_ms;
    j["rel_diff"] = std::isfinite(t.rel_diff) ? Json(t.rel_diff) : Json(nullptr);
    j["accepted"] = t.accepted;
    j["note"] = t.note;
    trials.push_back(std::move(j));
  }
  return Json{{"origin", d.origin}, {"cache_file", d.cache_file}, {"key", d.key},
              {"chosen", candidate_json(d.chosen)}, {"why", d.why}, {"created", d.created},
              {"model", d.model}, {"space", d.space}, {"trials", std::move(trials)}};
}

void render_autotune_cache(std::ostream& out, const Context& ctx) {
  const Config& s = ctx.config();
  const CacheView v = cache_view(ctx);
  out << "Auto-tuner: " << (*s.autotune ? "on" : "off") << " (autotune from " << s.autotune.from()
      << "); cache " << (v.dir.empty() ? "(no directory: set ACCELKIT_CACHE_DIR)" : v.dir)
      << (v.enabled ? "" : " - not used (--no-cache / autotune_cache = false)") << '\n';
  if (v.here.empty()) {
    out << "  no cached decisions for this device and these versions\n";
  } else {
    Table t({"MODEL", "CHOSEN", "TUNED", "ORIGIN", "WHY"});
    for (const auto& d : v.here) t.add_row({d.model, d.chosen.label(), d.created, "cache " + d.cache_file, d.why});
    t.print(out);
  }
  if (v.elsewhere)
    out << "  (" << v.elsewhere << " cached decision" << (v.elsewhere == 1 ? "" : "s")
        << " for other devices or versions)\n";
  for (const auto& d : v.corrupt)
    out << "  unreadable entry " << d.cache_file << ": " << d.why << " (it is rewritten when that model is tuned again)\n";
}

Json autotune_cache_json(const Context& ctx) {
  const Config& s = ctx.config();
  const CacheView v = cache_view(ctx);
  Json here = Json::array(), corrupt = Json::array();
  for (const auto& d : v.here) here.push_back(autotune_json(d));
  for (const auto& d : v.corrupt) corrupt.push_back(Json{{"cache_file", d.cache_file}, {"why", d.why}});
  return Json{{"enabled", *s.autotune},
              {"cache_dir", v.dir.empty() ? Json(nullptr) : Json(v.dir)},
              {"cache_used", v.enabled},
              {"decisions", std::move(here)},
              {"other_entries", v.elsewhere},
              {"corrupt", std::move(corrupt)}};
}

}  // namespace accelkit::cli
