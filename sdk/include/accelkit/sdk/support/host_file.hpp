// Reading the host's small text files (sysfs, procfs, /etc) safely, for plugins and the host
// alike. Paths come from sysfs_path()/procfs_path() (host_paths.hpp), so tests point them at
// fixture trees.
//
// Safe means: a read never blocks and never grows without bound.
//   - Only regular files are read. The file is opened with O_NONBLOCK (so opening a FIFO does
//     not wait for a writer) and checked with fstat before any read: a FIFO, socket, device
//     node or directory is refused with error == kNotRegular.
//   - At most `limit` bytes are read (default kDefaultLimit); `truncated` says when the file
//     had more. sysfs and procfs files report size 0, so the size is never trusted.
//   - errno is kept so a caller can say why a sensor is n/a (EACCES on RAPL, ENOENT).
// Parse helpers accept exactly one number with optional surrounding whitespace, and refuse
// overflow instead of wrapping.
//
// Header-only: an out-of-tree plugin gets it with the SDK. Thread-safe (no shared state).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelkit::host {

// Bytes read from one file unless the caller asks for more: sysfs attributes are one line,
// and /proc/cpuinfo of a 512-thread machine is about 1 MiB.
inline constexpr std::size_t kDefaultLimit = 4u << 20;
// error value for a path that is not a regular file (FIFO, socket, device, directory).
inline constexpr int kNotRegular = -1;

struct ReadResult {
  std::string text;
  int error = 0;           // errno of the failed open/read, kNotRegular, or 0 = ok
  bool truncated = false;  // the file held more than the limit; text has the first `limit` bytes
  // With kNotRegular: what it is instead ("a FIFO", "a socket", "a device", "a directory").
  // Since ABI 5.0.
  const char* not_regular = "";
  bool ok() const noexcept { return error == 0; }
};

// "Permission denied", "not a regular file", ...
inline std::string error_text(int error) {
  if (error == kNotRegular) return "not a regular file";
  char buf[256];
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  return ::strerror_r(error, buf, sizeof buf);  // GNU: returns the message (maybe not buf)
#else
  if (::strerror_r(error, buf, sizeof buf) != 0) return "error " + std::to_string(error);
  return buf;
#endif
}

// The file's first `limit` bytes (see the rules above).
inline ReadResult read_file_upto(const std::string& path, std::size_t limit) {
  ReadResult out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    out.error = errno;
    return out;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    out.error = errno;
  } else if (!S_ISREG(st.st_mode)) {
    out.error = kNotRegular;
    out.not_regular = S_ISFIFO(st.st_mode)                          ? "a FIFO"
                      : S_ISSOCK(st.st_mode)                        ? "a socket"
                      : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)  ? "a device"
                      : S_ISDIR(st.st_mode)                         ? "a directory"
                                                                    : "not a plain file";
  } else {
    char buf[4096];
    while (out.text.size() <= limit) {
      const std::size_t want = std::min(sizeof buf, limit + 1 - out.text.size());
      const ssize_t n = ::read(fd, buf, want);
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
    if (out.text.size() > limit) {
      out.text.resize(limit);
      out.truncated = true;
    }
  }
  ::close(fd);
  return out;
}

// Why a read failed: error_text(), and for a file that is not regular what it is instead
// ("not a regular file (a FIFO)").
inline std::string failure(const ReadResult& r) {
  std::string why = error_text(r.error);
  if (r.error == kNotRegular && *r.not_regular) why += std::string(" (") + r.not_regular + ")";
  return why;
}

// Why `path` could not be read, when that is worth telling someone: "cannot read <path>: not a
// regular file (a FIFO)", "cannot read <path>: Permission denied". "" when it was read, and
// when it is simply not there (ENOENT, ENOTDIR: a sensor this machine does not have).
inline std::string refusal(const std::string& path, const ReadResult& r) {
  if (r.ok() || r.error == ENOENT || r.error == ENOTDIR) return {};
  return "cannot read " + path + ": " + failure(r);
}

// The file's first kDefaultLimit bytes. One parameter, so it converts to a FileReader.
inline ReadResult read_file(const std::string& path) { return read_file_upto(path, kDefaultLimit); }

// How code under test reads files: production passes read_file, tests inject a function to
// simulate errors root cannot get (EACCES) or to count reads.
using FileReader = std::function<ReadResult(const std::string&)>;

// Text without leading/trailing whitespace.
inline std::string trim(std::string_view s) {
  const char* ws = " \t\r\n";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}

inline bool starts_with(std::string_view s, std::string_view prefix) noexcept {
  return s.substr(0, prefix.size()) == prefix;
}

// The first line of `text`, trimmed.
inline std::string first_line(std::string_view text) {
  if (auto nl = text.find('\n'); nl != std::string_view::npos) text = text.substr(0, nl);
  return trim(text);
}

// A decimal integer with optional surrounding whitespace, or nullopt (also on overflow).
inline std::optional<std::int64_t> parse_int(std::string_view text) {
  const std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || end == t.c_str() || *end != '\0') return std::nullopt;
  return static_cast<std::int64_t>(v);
}

// A hexadecimal number ("0x1002", "10de"), at most 32 bits, or nullopt.
inline std::optional<std::uint32_t> parse_hex32(std::string_view text) {
  const std::string t = trim(text);
  if (t.empty() || t[0] == '-' || t[0] == '+') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(t.c_str(), &end, 16);
  if (errno != 0 || end == t.c_str() || *end != '\0' || v > 0xffffffffULL) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

// The file's first line, trimmed, or nullopt when it cannot be read.
inline std::optional<std::string> read_line(const FileReader& read, const std::string& path) {
  ReadResult r = read(path);
  if (!r.ok()) return std::nullopt;
  return first_line(r.text);
}
inline std::optional<std::string> read_line(const std::string& path) { return read_line(read_file, path); }

// The file's first line as a decimal integer, or nullopt.
inline std::optional<std::int64_t> read_int(const FileReader& read, const std::string& path) {
  auto line = read_line(read, path);
  return line ? parse_int(*line) : std::nullopt;
}
inline std::optional<std::int64_t> read_int(const std::string& path) { return read_int(read_file, path); }

// The file's first line as a hexadecimal number ("0x10de"), or nullopt.
inline std::optional<std::uint32_t> read_hex32(const std::string& path) {
  auto line = read_line(path);
  return line ? parse_hex32(*line) : std::nullopt;
}

// Names in a directory (not "." or ".."), sorted; empty when it cannot be opened.
inline std::vector<std::string> list_dir(const std::string& path) {
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

// Whether a name under sysfs class/drm is a card ("card0"), not a connector ("card0-DP-1") or a
// render node ("renderD128").
inline bool is_drm_card(std::string_view name) {
  if (!starts_with(name, "card") || name.size() == 4) return false;
  return std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

inline bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace accelkit::host
