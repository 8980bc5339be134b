// The auto-tuner's cache entries: one JSON file per key under <cache dir>/autotune/.
#pragma once

#include <optional>
#include <string>

#include "accelkit/autotune.hpp"

namespace accelkit::autotune_detail {

constexpr int kCacheFormat = 1;

// FNV-1a 64, as 16 hex digits: the entry's file name (collisions are caught by comparing the
// stored fingerprint strings).
std::string hash_hex(const std::string& text);

std::string entry_path(const std::string& dir, const std::string& key);

// Now, UTC, ISO 8601 ("2026-11-25T10:09:09Z"): when a decision was measured.
std::string utc_now();

// The entry at `path`. nullopt with *problem empty when there is no file; nullopt with
// *problem set when the file exists but is not a readable entry of this format.
std::optional<TuneDecision> read_entry(const std::string& path, std::string* problem);

// Writes atomically (temporary file in the same directory, fsync, rename, fsync the
// directory), creating the directories. Throws std::runtime_error with the reason.
void write_entry(const std::string& path, const TuneDecision& decision);

}  // namespace accelkit::autotune_detail
