// A decision-cache entry kept as JSON (decision_cache.hpp): read, parsed and checked to be an
// object of the expected format, the same way for every kind of entry.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "accelkit/decision_cache.hpp"

namespace accelkit::decision_cache {

// The entry at `path` as `parse` (const nlohmann::json&) -> Decision makes it, marked as read
// from the cache. nullopt with *problem empty when there is no file; nullopt with *problem set
// when the file exists but is not a readable entry of `format` (whatever `parse` throws says why).
template <typename Decision, typename Parse>
std::optional<Decision> read_json_entry(const std::string& path, int format, std::string* problem, Parse parse) {
  const std::optional<std::string> text = read_entry_text(path, problem);
  if (!text) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(*text);
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    const int found = j.at("format").get<int>();
    if (found != format)
      throw std::runtime_error("format " + std::to_string(found) + ", this accelkit reads " + std::to_string(format));
    Decision d = parse(j);
    d.origin = "cache";
    d.cache_file = path;
    return d;
  } catch (const std::exception& e) {
    *problem = e.what();
    return std::nullopt;
  }
}

}  // namespace accelkit::decision_cache
