#include "accelkit/atomic_file.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace accelkit {

namespace {

// The system's reason; with EFBIG the process's file-size limit too (ulimit -f, as batch
// systems set it): a write past it fails so (SIGXFSZ ignored, as the accelkit executable has it).
std::string reason(int err) {
  std::string text = std::strerror(err);
  struct rlimit limit {};
  if (err == EFBIG && ::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    text += " (this process may write files of at most " + std::to_string(limit.rlim_cur) + " bytes: ulimit -f)";
  return text;
}

[[noreturn]] void fail(const std::string& what, int err) { throw std::runtime_error(what + ": " + reason(err)); }

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory " + dir + " to sync it", errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) fail("fsync of directory " + dir + " failed", err);  // EINVAL: cannot sync a directory there
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::filesystem::path target(path);
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : std::string(".");
  const std::string temp =
      (std::filesystem::path(dir) / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    fail("cannot create " + temp + " to write " + path, err);
  }
  // Every failure from here removes the temporary file; the message names the file asked for.
  auto give_up = [&](const std::string& what, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    fail(what + " failed", err);
  };
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      give_up("writing " + path, err);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  // errno is read before the message is made (making it may allocate).
  if (::fchmod(fd, 0644) != 0) {  // whatever the umask
    const int err = errno;
    give_up("chmod of " + path, err);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    give_up("fsync of " + path, err);
  }
  const int closed = ::close(fd);
  const int close_err = errno;
  fd = -1;
  if (closed != 0) give_up("closing " + path, close_err);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    give_up("renaming " + temp + " to " + path, err);
  }
  fsync_dir(dir);
}

}  // namespace accelkit
