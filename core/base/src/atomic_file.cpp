#include "accelkit/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace accelkit {

namespace {

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err));
}

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
  if (fd < 0) fail("cannot create " + temp, errno);
  auto give_up = [&](const std::string& what, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    fail(what + " " + temp + " failed", err);
  };
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      give_up("writing", errno);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) give_up("chmod of", errno);  // whatever the umask
  if (::fsync(fd) != 0) give_up("fsync of", errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) give_up("closing", errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) give_up("renaming to " + path + ":", errno);
  fsync_dir(dir);
}

}  // namespace accelkit
