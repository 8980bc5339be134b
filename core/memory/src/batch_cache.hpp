// The batch-size finder's cache entries (batch_finder.hpp): one JSON file per key under
// <cache dir>/batch/. Internal to the core.
#pragma once

#include <optional>
#include <string>

#include "accelkit/batch_finder.hpp"

namespace accelkit::batch_cache {

constexpr int kFormat = 1;

std::string entry_path(const std::string& dir, const std::string& key);

// The entry at `path`: nullopt with *problem empty when there is no file, set when the file is
// not a readable entry of this format.
std::optional<BatchDecision> read_entry(const std::string& path, std::string* problem);

// Atomically, creating the directories; throws std::runtime_error with the reason.
void write_entry(const std::string& path, const BatchDecision& decision);

}  // namespace accelkit::batch_cache
