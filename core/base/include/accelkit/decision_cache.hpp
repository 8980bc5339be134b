// The decision cache: what accelkit measured once and keeps (the auto-tuner's and step
// tuning's choices, the AdamW implementation, the batch finder's and inference's decisions, the
// plugin registry, the tensor cache), one file per key in a folder per kind under one
// directory. Here: where that directory is, and the helpers every kind reads and writes with.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace accelkit {

// The cache directory every cache uses: ACCELKIT_CACHE_DIR, else $XDG_CACHE_HOME/accelkit, else
// $HOME/.cache/accelkit (read with secure_getenv). Empty, and caching off, when none can be
// named or the one named cannot be used (decision_cache::dir_problem): then one warning, once
// per process for each directory, says so and why ("caching is off: /x: Not a directory").
// Decisions are still made, just neither read nor kept.
std::string decision_cache_dir();
// The same, and *why_off the reason when it is empty ("" when it is not).
std::string decision_cache_dir(std::string* why_off);

namespace decision_cache {

// FNV-1a 64, as 16 hex digits: the entry's file name (collisions are caught by comparing the
// stored fingerprint strings).
std::string hash_hex(const std::string& text);

// Now, UTC, ISO 8601 ("2026-11-25T10:09:09Z"): when a decision was measured.
std::string utc_now();

// Why caching cannot use `dir` ("" when it can): a path too long for the entries under it,
// not a directory, not writable, or (missing) a folder above it that cannot hold it. A missing
// directory is created by the first write.
std::string dir_problem(const std::string& dir);

// The most an entry may hold: a larger file is no entry.
inline constexpr std::size_t kEntryLimit = 1u << 20;

// The text of the file at `path`, read with the SDK's bounded reader (support/host_file.hpp:
// regular files only, opened non-blocking, at most kEntryLimit bytes): nullopt with *problem
// empty when there is none, set when it cannot be read ("not a regular file (a FIFO)",
// "Permission denied", "larger than 1 MiB, which no entry is"). An entry that cannot be read
// is measured again and replaced, the new file renamed over it.
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
