// Small helpers shared by the test suites: a temporary directory, a scoped environment
// variable, a scoped working directory, and string checks. Header-only; no doctest inside.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace accelkit::test {

// Whether this process drew test_seed(): test_main.cpp's listener then names the seed after a
// failed run, so that any failure on fresh random inputs can be repeated.
inline std::atomic<bool> seed_drawn{false};

// The seed of a suite's fresh random inputs: random each run, ACCELKIT_TEST_SEED fixes it.
// A failed run prints it (test_main.cpp); a suite may also put it in a failure's context.
inline std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    seed_drawn = true;
    if (const char* s = std::getenv("ACCELKIT_TEST_SEED")) return static_cast<std::uint64_t>(std::stoull(s));
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

namespace fs = std::filesystem;

// A TCP port free on the loopback interface now (the kernel's pick): a launcher's MASTER_PORT.
inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("free_loopback_port: no socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("free_loopback_port: cannot bind a loopback port");
  return ntohs(a.sin_port);
}

// A fresh directory under $TMPDIR (or /tmp), mode 0700, removed with everything in it.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "accelkit-test") {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + std::string(prefix) + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = fs::path(buf.data());
  }
  ~TempDir() {
    std::error_code ec;
    // Make everything removable again whatever a test did to the modes.
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec))
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const noexcept { return path_; }
  std::string str() const { return path_.string(); }
  // path()/rel, with its parent directories created.
  fs::path make_dir(const fs::path& rel) const {
    fs::path p = path_ / rel;
    fs::create_directories(p);
    return p;
  }

 private:
  fs::path path_;
};

// Sets (or, with nullopt, unsets) an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = std::string(old);
    apply(value);
  }
  ~ScopedEnv() { apply(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void apply(const std::optional<std::string>& value) const {
    if (value)
      ::setenv(name_.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  std::string name_;
  std::optional<std::string> old_;
};

// A procfs whose `stat` the test writes, in place of /proc for the scope (ACCELKIT_PROCFS_ROOT);
// every other entry of /proc but the processes' links to the real one (cpuinfo, meminfo,
// self/...). The machine's load as accelkit reads it (accelkit/machine_load.hpp) is quiet
// until the test says other processes ran for some seconds.
class FakeProcStat {
 public:
  FakeProcStat() : env_("ACCELKIT_PROCFS_ROOT", dir_.path().string()) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      const std::string name = e.path().filename().string();
      if (name == "stat" || std::isdigit(static_cast<unsigned char>(name[0]))) continue;
      fs::create_symlink(e.path(), dir_.path() / name, ec);
    }
    write();
  }
  void add_busy_seconds(double seconds) {
    busy_ticks_ += static_cast<long long>(seconds * static_cast<double>(::sysconf(_SC_CLK_TCK)));
    write();
  }

 private:
  void write() const { std::ofstream(dir_.path() / "stat") << "cpu  " << busy_ticks_ << " 0 0 100000 0 0 0 0 0 0\n"; }
  TempDir dir_{"accelkit-procfs"};
  ScopedEnv env_;
  long long busy_ticks_ = 1000;
};

// Changes the working directory for the scope.
class ScopedCwd {
 public:
  explicit ScopedCwd(const fs::path& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~ScopedCwd() {
    std::error_code ec;
    fs::current_path(old_, ec);
  }
  ScopedCwd(const ScopedCwd&) = delete;
  ScopedCwd& operator=(const ScopedCwd&) = delete;

 private:
  fs::path old_;
};

inline void write_file(const fs::path& path, std::string_view text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// Copies `from` to `to` (parents created), replacing what is there, keeping the mode.
inline fs::path copy_to(const fs::path& from, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  return to;
}

// chmod, exactly (no umask).
inline void set_mode(const fs::path& path, ::mode_t mode) {
  if (::chmod(path.c_str(), mode) != 0) throw std::runtime_error("chmod failed: " + path.string());
}

inline std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

inline bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

inline bool icontains(std::string_view haystack, std::string_view needle) {
  return contains(lower(haystack), lower(needle));
}

// Whether any line of `lines` contains `needle`.
inline bool any_contains(const std::vector<std::string>& lines, std::string_view needle) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return contains(l, needle); });
}

inline std::string join(const std::vector<std::string>& lines, std::string_view sep = "\n") {
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) out += sep;
    out += lines[i];
  }
  return out;
}

}  // namespace accelkit::test
