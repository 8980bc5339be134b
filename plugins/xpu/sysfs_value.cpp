#include "sysfs_value.hpp"

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::xpu {
namespace {

// The file's first line, or nullopt: missing (nothing said) or unreadable (said).
std::optional<std::string> line_of(const std::string& path, std::string* problem) {
  const host::ReadResult r = host::read_file_upto(path, 4096);
  if (!r.ok()) {
    if (problem) *problem = host::refusal(path, r);
    return std::nullopt;
  }
  return host::first_line(r.text);
}

void refuse(const std::string& path, const std::string& text, const char* what, std::string* problem) {
  if (problem) *problem = path + " holds '" + text.substr(0, 40) + "', not " + what + ": ignored";
}

}  // namespace

std::optional<std::uint64_t> read_count(const std::string& path, std::string* problem) {
  if (problem) problem->clear();
  const auto text = line_of(path, problem);
  if (!text) return std::nullopt;
  const auto v = host::parse_int(*text);
  if (!v || *v < 0) {
    refuse(path, *text, "a non-negative integer", problem);
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(*v);
}

std::optional<std::int64_t> read_signed(const std::string& path, std::string* problem) {
  if (problem) problem->clear();
  const auto text = line_of(path, problem);
  if (!text) return std::nullopt;
  const auto v = host::parse_int(*text);
  if (!v) refuse(path, *text, "an integer", problem);
  return v;
}

}  // namespace accelkit::xpu
