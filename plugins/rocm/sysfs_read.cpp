#include "sysfs_read.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace accelkit::rocm {

std::optional<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[4096];
  for (;;) {  // sysfs files report size 0: read until EOF
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      ::close(fd);
      return std::nullopt;
    }
  }
  ::close(fd);
  return text;
}

std::string trim(std::string_view s) {
  const char* ws = " \t\r\n";
  auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}

std::optional<std::string> read_line(const std::string& path) {
  auto text = read_file(path);
  if (!text) return std::nullopt;
  std::string_view v = *text;
  if (auto nl = v.find('\n'); nl != std::string_view::npos) v = v.substr(0, nl);
  return trim(v);
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  const std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || end == t.c_str() || *end != '\0') return std::nullopt;
  return v;
}

std::optional<std::int64_t> read_int(const std::string& path) {
  auto line = read_line(path);
  return line ? parse_int(*line) : std::nullopt;
}

std::optional<std::uint32_t> read_hex(const std::string& path) {
  auto line = read_line(path);
  if (!line || line->empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  unsigned long v = std::strtoul(line->c_str(), &end, 16);
  if (errno != 0 || end == line->c_str() || *end != '\0' || v > 0xffffffffUL) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(path.c_str());
  if (!dir) return names;
  while (const dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace accelkit::rocm
