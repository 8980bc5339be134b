#include "autotune_cache.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "accelkit/atomic_file.hpp"
#include "accelkit/sdk/host_paths.hpp"

namespace accelkit {

namespace fs = std::filesystem;
using nlohmann::json;

std::string autotune_cache_dir() {
  const char* dir = secure_env("ACCELKIT_CACHE_DIR");
  if (dir && *dir) return dir;
  const char* xdg = secure_env("XDG_CACHE_HOME");
  if (xdg && *xdg == '/') return std::string(xdg) + "/accelkit";  // the spec ignores relative values
  const char* home = secure_env("HOME");
  if (home && *home) return std::string(home) + "/.cache/accelkit";
  return {};
}

namespace autotune_detail {

std::string hash_hex(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string entry_path(const std::string& dir, const std::string& key) {
  return (fs::path(dir) / "autotune" / (key + ".json")).string();
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

}  // namespace

std::optional<std::string> read_entry_text(const std::string& path, std::string* problem) {
  problem->clear();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno != ENOENT) *problem = std::string("cannot open: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_entry_text(const std::string& path, const std::string& text) {
  const fs::path target(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) throw std::runtime_error("cannot create " + target.parent_path().string() + ": " + ec.message());
  write_file_atomically(path, text);
}

std::vector<std::string> entry_files(const std::string& dir, const char* kind) {
  std::vector<std::string> files;
  std::error_code ec;
  const fs::path root = fs::path(dir) / kind;
  if (dir.empty() || !fs::is_directory(root, ec)) return files;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.path().extension() == ".json" && e.path().filename().string()[0] != '.') files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::optional<TuneDecision> read_entry(const std::string& path, std::string* problem) {
  const std::optional<std::string> text = read_entry_text(path, problem);
  if (!text) return std::nullopt;
  try {
    const json j = json::parse(*text);
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    const int format = j.at("format").get<int>();
    if (format != kCacheFormat)
      throw std::runtime_error("format " + std::to_string(format) + ", this accelkit reads " +
                               std::to_string(kCacheFormat));
    TuneDecision d;
    d.origin = "cache";
    d.cache_file = path;
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
  } catch (const std::exception& e) {
    *problem = e.what();
    return std::nullopt;
  }
}

void write_entry(const std::string& path, const TuneDecision& d) {
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
  write_entry_text(path, j.dump(2) + "\n");
}

}  // namespace autotune_detail

std::vector<TuneDecision> list_autotune_cache(const std::string& dir) {
  return autotune_detail::list_entries<TuneDecision>(dir, "autotune", autotune_detail::read_entry);
}

}  // namespace accelkit
