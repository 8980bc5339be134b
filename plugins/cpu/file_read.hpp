// Small-file reading for sysfs/procfs, with the errno kept so callers can say why a sensor
// is n/a (EACCES on RAPL energy_uj, ENOENT for a missing sensor).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelkit::cpu {

struct ReadResult {
  std::string text;
  int error = 0;  // errno of the failed open/read; 0 = ok
  bool ok() const noexcept { return error == 0; }
};

// Reads a whole file (sysfs and procfs files report size 0, so it reads until EOF).
ReadResult read_text_file(const std::string& path);

// How the probe and monitor read files; tests inject one to simulate errors root cannot get
// (EACCES) or to count reads.
using FileReader = std::function<ReadResult(const std::string&)>;

// The file's first line without surrounding whitespace, or nullopt when it cannot be read.
std::optional<std::string> read_trimmed(const FileReader& read, const std::string& path);

// A decimal integer with optional surrounding whitespace (sysfs style), or nullopt.
std::optional<long long> parse_integer(std::string_view text);

// The file's first line parsed with parse_integer, or nullopt.
std::optional<long long> read_integer(const FileReader& read, const std::string& path);

// Names in a directory (not "." or ".."), sorted; empty when it cannot be opened.
std::vector<std::string> list_dir(const std::string& path);

// "Permission denied" etc.
std::string error_text(int error);

// Text without leading/trailing whitespace.
std::string trim(std::string_view s);

}  // namespace accelkit::cpu
