// The auto-tuner's entries in the decision cache (<cache dir>/autotune/<key>.json).
#pragma once

#include <optional>
#include <string>

#include "accelkit/autotune.hpp"

namespace accelkit::autotune_entry {

constexpr int kCacheFormat = 1;

// <dir>/autotune/<key>.json
std::string path(const std::string& dir, const std::string& key);

// The entry at `path`. nullopt with *problem empty when there is no file; nullopt with
// *problem set when the file exists but is not a readable entry of this format.
std::optional<TuneDecision> read(const std::string& path, std::string* problem);

// Writes atomically (temporary file in the same directory, fsync, rename, fsync the
// directory), creating the directories. Throws std::runtime_error with the reason.
void write(const std::string& path, const TuneDecision& decision);

}  // namespace accelkit::autotune_entry
