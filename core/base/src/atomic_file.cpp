#include "accelkit/atomic_file.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

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
  if (fd < 0) {
    const int err = errno;
    fail("cannot open directory " + dir + " to sync it", err);
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) fail("fsync of directory " + dir + " failed", err);  // EINVAL: cannot sync a directory there
}

// The temporary file of one write: closed, and removed unless it took its name, however the
// write ends (a failure's exception, any other one).
class TempFile {
 public:
  TempFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!renamed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const noexcept { return fd_; }
  // close(2)'s result; the file is closed either way.
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }
  void renamed() noexcept { renamed_ = true; }

 private:
  std::string path_;
  int fd_;
  bool renamed_ = false;
};

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::filesystem::path target(path);
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : std::string(".");
  const std::string temp =
      (std::filesystem::path(dir) / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    fail("cannot create " + temp + " to write " + path, err);
  }
  // Every failure from here removes the temporary file; the messages name the file asked for,
  // and read errno before they are made (making one may allocate).
  TempFile file(temp, fd);
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      fail("writing " + path + " failed", err);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) {  // whatever the umask
    const int err = errno;
    fail("chmod of " + path + " failed", err);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    fail("fsync of " + path + " failed", err);
  }
  if (file.close() != 0) {
    const int err = errno;
    fail("closing " + path + " failed", err);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    fail("renaming " + temp + " to " + path + " failed", err);
  }
  file.renamed();
  fsync_dir(dir);
}

}  // namespace accelkit
