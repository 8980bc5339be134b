// The auto-tuner's entries in the decision cache: one JSON file per key under
// <cache dir>/autotune/ (read and written with the cache's helpers, decision_cache.hpp).
#include "autotune_entry.hpp"

#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "accelkit/base/json_entry.hpp"
#include "accelkit/decision_cache.hpp"

namespace accelkit {

using nlohmann::json;

namespace autotune_entry {

std::string path(const std::string& dir, const std::string& key) {
  return (std::filesystem::path(dir) / "autotune" / (key + ".json")).string();
}

namespace {

json candidate_json(const TuneCandidate& c) {
  return json{{"precision", to_string(c.precision)}, {"fused_optimizer", c.fused ? "on" : "off"}, {"threads", c.threads}};
}

TuneCandidate candidate_from(const json& j) {
  TuneCandidate c;
  const auto precision = j.at("precision").get<std::string>();
  const auto fused = j.at("fused_optimizer").get<std::string>();
  c.threads = j.at("threads").get<int>();
  if (auto d = dtype_from_string(precision)) c.precision = *d;
  else throw std::runtime_error("unknown precision '" + precision.substr(0, 40) + "'");
  if (fused != "on" && fused != "off")
    throw std::runtime_error("fused_optimizer must be on or off, got '" + fused.substr(0, 40) + "'");
  c.fused = fused == "on";
  if (c.threads < 0) throw std::runtime_error("negative thread count");
  return c;
}

// An entry's fields (the format already checked).
TuneDecision decision_from(const json& j) {
  TuneDecision d;
  d.key = j.at("key").get<std::string>();
  d.device = j.at("device").get<std::string>();
  d.model = j.at("model").get<std::string>();
  d.versions = j.at("versions").get<std::string>();
  d.space = j.at("space").get<std::string>();
  d.created = j.at("created").get<std::string>();
  d.why = j.at("why").get<std::string>();
  d.chosen = candidate_from(j.at("chosen"));
  for (const json& t : j.at("trials")) {
    TuneTrial trial;
    trial.candidate = candidate_from(t);
    trial.reference = t.at("reference").get<bool>();
    trial.median_ms = t.at("median_ms").get<double>();
    trial.rel_diff = t.at("rel_diff").is_null() ? std::numeric_limits<double>::infinity()
                                                : t.at("rel_diff").get<double>();
    trial.eligible = t.at("eligible").get<bool>();
    trial.accepted = t.at("accepted").get<bool>();
    trial.note = t.at("note").get<std::string>();
    d.trials.push_back(std::move(trial));
  }
  return d;
}

}  // namespace

std::optional<TuneDecision> read(const std::string& path, std::string* problem) {
  return decision_cache::read_json_entry<TuneDecision>(path, kCacheFormat, problem, decision_from);
}

void write(const std::string& path, const TuneDecision& d) {
  json trials = json::array();
  for (const TuneTrial& t : d.trials) {
    json tj = candidate_json(t.candidate);
    tj["reference"] = t.reference;
    tj["median_ms"] = t.median_ms;
    tj["rel_diff"] = std::isfinite(t.rel_diff) ? json(t.rel_diff) : json(nullptr);
    tj["eligible"] = t.eligible;
    tj["accepted"] = t.accepted;
    tj["note"] = t.note;
    trials.push_back(std::move(tj));
  }
  const json j{{"format", kCacheFormat}, {"key", d.key},         {"device", d.device},
               {"model", d.model},       {"versions", d.versions}, {"space", d.space},
               {"created", d.created},   {"why", d.why},           {"chosen", candidate_json(d.chosen)},
               {"trials", std::move(trials)}};
  decision_cache::write_entry_text(path, j.dump(2) + "\n");
}

}  // namespace autotune_entry

std::vector<TuneDecision> list_autotune_cache(const std::string& dir) {
  return decision_cache::list_entries<TuneDecision>(dir, "autotune", autotune_entry::read);
}

}  // namespace accelkit
