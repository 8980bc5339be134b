#include "file_read.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace accelkit::cpu {

ReadResult read_text_file(const std::string& path) {
  ReadResult out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.error = errno;
    return out;
  }
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.text.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      out.error = errno;
      out.text.clear();
      break;
    }
  }
  ::close(fd);
  return out;
}

std::string trim(std::string_view s) {
  const char* ws = " \t\r\n";
  auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

std::optional<std::string> read_trimmed(const FileReader& read, const std::string& path) {
  ReadResult r = read(path);
  if (!r.ok()) return std::nullopt;
  std::string_view text = r.text;
  if (auto nl = text.find('\n'); nl != std::string_view::npos) text = text.substr(0, nl);
  return trim(text);
}

std::optional<long long> parse_integer(std::string_view text) {
  const std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || end == t.c_str() || *end != '\0') return std::nullopt;
  return v;
}

std::optional<long long> read_integer(const FileReader& read, const std::string& path) {
  auto text = read_trimmed(read, path);
  if (!text) return std::nullopt;
  return parse_integer(*text);
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

std::string error_text(int error) {
  char buf[256];
  // GNU strerror_r returns the message pointer (maybe not buf).
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  return ::strerror_r(error, buf, sizeof buf);
#else
  if (::strerror_r(error, buf, sizeof buf) != 0) return "error " + std::to_string(error);
  return buf;
#endif
}

}  // namespace accelkit::cpu
