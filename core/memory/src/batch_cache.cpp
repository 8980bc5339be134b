// The batch-size finder's cache entries: one JSON file per key under <cache dir>/batch/, read
// and written with the decision cache's helpers (decision_cache.hpp, json_entry.hpp).
#include "batch_cache.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "accelkit/base/json_entry.hpp"
#include "accelkit/decision_cache.hpp"

namespace accelkit {

using nlohmann::json;

namespace batch_cache {

std::string entry_path(const std::string& dir, const std::string& key) {
  return (std::filesystem::path(dir) / "batch" / (key + ".json")).string();
}

namespace {

// An entry's fields (the format already checked), refused when implausible.
BatchDecision batch_decision_from(const json& j) {
  BatchDecision d;
  d.key = j.at("key").get<std::string>();
  d.fingerprint = j.at("fingerprint").get<std::string>();
  d.model = j.at("model").get<std::string>();
  d.created = j.at("created").get<std::string>();
  d.device = j.at("device").get<std::string>();
  d.method = j.at("method").get<std::string>();
  d.why = j.at("why").get<std::string>();
  d.largest = j.at("largest").get<std::int64_t>();
  d.batch = j.at("batch").get<std::int64_t>();
  d.accumulation = j.at("accumulation").get<std::int64_t>();
  d.memory_at_largest = j.at("memory_at_largest").get<std::uint64_t>();
  d.budget = j.at("budget").get<std::uint64_t>();
  d.margin_pct = j.at("margin_pct").get<int>();
  if (d.largest < 1 || d.batch < 1 || d.accumulation < 1 || (d.method != "search" && d.method != "fit"))
    throw std::runtime_error("implausible values (largest " + std::to_string(d.largest) + ", batch " +
                             std::to_string(d.batch) + ", accumulation " + std::to_string(d.accumulation) +
                             ", method '" + d.method.substr(0, 20) + "')");
  d.effective = d.batch * d.accumulation;
  for (const json& t : j.at("trials")) {
    BatchTrial trial;
    trial.batch = t.at("batch").get<std::int64_t>();
    trial.fits = t.at("fits").get<bool>();
    trial.peak_bytes = t.at("peak_bytes").get<std::uint64_t>();
    trial.note = t.at("note").get<std::string>();
    d.trials.push_back(std::move(trial));
  }
  return d;
}

}  // namespace

std::optional<BatchDecision> read_entry(const std::string& path, std::string* problem) {
  return decision_cache::read_json_entry<BatchDecision>(path, kFormat, problem, batch_decision_from);
}

void write_entry(const std::string& path, const BatchDecision& d) {
  json trials = json::array();
  for (const BatchTrial& t : d.trials)
    trials.push_back(json{{"batch", t.batch}, {"fits", t.fits}, {"peak_bytes", t.peak_bytes}, {"note", t.note}});
  const json j{{"format", kFormat},
               {"key", d.key},
               {"fingerprint", d.fingerprint},
               {"model", d.model},
               {"created", d.created},
               {"device", d.device},
               {"method", d.method},
               {"why", d.why},
               {"largest", d.largest},
               {"batch", d.batch},
               {"accumulation", d.accumulation},
               {"memory_at_largest", d.memory_at_largest},
               {"budget", d.budget},
               {"margin_pct", d.margin_pct},
               {"trials", std::move(trials)}};
  decision_cache::write_entry_text(path, j.dump(2) + "\n");
}

}  // namespace batch_cache

std::vector<BatchDecision> list_batch_cache(const std::string& dir) {
  return decision_cache::list_entries<BatchDecision>(dir, "batch", batch_cache::read_entry);
}

}  // namespace accelkit
