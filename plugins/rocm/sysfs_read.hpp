// Small-file reading for amdgpu sysfs and the KFD topology.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelkit::rocm {

// The whole file, or nullopt when it cannot be opened or read.
std::optional<std::string> read_file(const std::string& path);
// The first line without surrounding whitespace.
std::optional<std::string> read_line(const std::string& path);
// A decimal integer file ("43000\n"), or nullopt.
std::optional<std::int64_t> read_int(const std::string& path);
// A hexadecimal file ("0x1002\n"), or nullopt.
std::optional<std::uint32_t> read_hex(const std::string& path);
// Names in a directory, sorted; empty when it cannot be opened.
std::vector<std::string> list_dir(const std::string& path);
bool exists(const std::string& path);

std::string trim(std::string_view s);
std::optional<std::int64_t> parse_int(std::string_view text);
bool starts_with(std::string_view s, std::string_view prefix);

}  // namespace accelkit::rocm
