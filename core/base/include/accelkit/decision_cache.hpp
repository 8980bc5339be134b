// The decision cache: what accelkit measured once and keeps (the auto-tuner's and step
// tuning's choices, the AdamW implementation, the batch finder's and inference's decisions, the
// plugin registry, the tensor cache), one file per key in a folder per kind under one
// directory. Here: where that directory is, and the helpers every kind reads and writes with.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace accelkit {

// The cache directory: ACCELKIT_CACHE_DIR, else $XDG_CACHE_HOME/accelkit, else
// $HOME/.cache/accelkit (read with secure_getenv). Empty when none can be named.
std::string decision_cache_dir();

namespace decision_cache {

// FNV-1a 64, as 16 hex digits: the entry's file name (collisions are caught by comparing the
// stored fingerprint strings).
std::string hash_hex(const std::string& text);

// Now, UTC, ISO 8601 ("2026-11-25T10:09:09Z"): when a decision was measured.
std::string utc_now();

// The text of the file at `path`: nullopt with *problem empty when there is none, set when it
// cannot be read.
std::optional<std::string> read_entry_text(const std::string& path, std::string* problem);
// Writes `text` atomically (temporary file, fsync, rename, fsync the directory), creating the
// directories. Throws std::runtime_error with the reason.
void write_entry_text(const std::string& path, const std::string& text);
// The entries (*.json, not hidden) in dir/kind, sorted by name; none when it is no directory.
std::vector<std::string> entry_files(const std::string& dir, const char* kind);

// Every entry in dir/kind read by `read` (path, &problem) -> optional<Decision>, oldest first
// (Decision::created); an unreadable one comes with origin "corrupt" and `why` saying why.
template <typename Decision, typename Read>
std::vector<Decision> list_entries(const std::string& dir, const char* kind, Read read) {
  std::vector<Decision> out;
  for (const std::string& f : entry_files(dir, kind)) {
    std::string problem;
    std::optional<Decision> d = read(f, &problem);
    if (!d) {
      d.emplace();
      d->origin = "corrupt";
      d->cache_file = f;
      d->why = problem.empty() ? "vanished while listed" : problem;
    }
    out.push_back(std::move(*d));
  }
  std::stable_sort(out.begin(), out.end(), [](const Decision& a, const Decision& b) { return a.created < b.created; });
  return out;
}

}  // namespace decision_cache

}  // namespace accelkit
