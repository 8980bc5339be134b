#include "accelkit/decision_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <climits>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include "accelkit/atomic_file.hpp"
#include "accelkit/base/strings.hpp"
#include "accelkit/sdk/host_paths.hpp"
#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit {

namespace fs = std::filesystem;

namespace {

// The directory the environment names (see decision_cache_dir), unchecked; "" when none.
std::string named_cache_dir() {
  const char* dir = secure_env("ACCELKIT_CACHE_DIR");
  if (dir && *dir) return dir;
  const char* xdg = secure_env("XDG_CACHE_HOME");
  if (xdg && *xdg == '/') return std::string(xdg) + "/accelkit";  // the spec ignores relative values
  const char* home = secure_env("HOME");
  if (home && *home) return std::string(home) + "/.cache/accelkit";
  return {};
}

// Says `why` caching is off, once per process for each directory and reason.
void warn_caching_off(const std::string& dir, const std::string& why) {
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!said.insert(dir + '\n' + why).second) return;
  if (dir.empty()) spdlog::warn("caching is off: {}", why);
  else spdlog::warn("caching is off: {}: {}", text::shorten(dir, 160), why);
}

}  // namespace

std::string decision_cache_dir(std::string* why_off) {
  const std::string dir = named_cache_dir();
  const std::string why = dir.empty() ? "no cache directory (set ACCELKIT_CACHE_DIR, XDG_CACHE_HOME or HOME)"
                                      : decision_cache::dir_problem(dir);
  if (why_off) *why_off = why.empty() || dir.empty() ? why : text::shorten(dir, 160) + ": " + why;
  if (why.empty()) return dir;
  warn_caching_off(dir, why);
  return {};
}

std::string decision_cache_dir() { return decision_cache_dir(nullptr); }

namespace decision_cache {

std::string hash_hex(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string dir_problem(const std::string& dir) {
  // Room for the longest name a cache makes under it (a kind's folder, a temporary file).
  constexpr std::size_t kEntryRoom = 128;
  if (dir.size() + kEntryRoom >= PATH_MAX) return host::error_text(ENAMETOOLONG);
  fs::path p(dir);
  for (;;) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      const int err = errno;
      const fs::path up = p.parent_path();
      if (err != ENOENT || up == p) return host::error_text(err);
      p = up.empty() ? fs::path(".") : up;  // missing: created on the first write, if its parent allows
      continue;
    }
    if (!S_ISDIR(st.st_mode)) return host::error_text(ENOTDIR);
    if (::access(p.c_str(), W_OK | X_OK) == 0) return {};
    const std::string why = host::error_text(errno);
    return p == fs::path(dir) ? why : "cannot be created in " + p.string() + ": " + why;
  }
}

std::optional<std::string> read_entry_text(const std::string& path, std::string* problem) {
  problem->clear();
  const host::ReadResult r = host::read_file_upto(path, kEntryLimit);
  if (r.error == ENOENT) return std::nullopt;
  if (!r.ok()) {
    struct stat st {};
    // Opening a socket fails (ENXIO) before the reader can say what it is.
    const bool socket = r.error == ENXIO && ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
    *problem = socket ? "not a regular file (a socket)" : host::failure(r);
    return std::nullopt;
  }
  if (r.truncated) {
    *problem = "larger than " + std::to_string(kEntryLimit >> 20) + " MiB, which no entry is";
    return std::nullopt;
  }
  return r.text;
}

void write_entry_text(const std::string& path, const std::string& text) {
  const fs::path target(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) throw std::runtime_error("cannot create " + target.parent_path().string() + ": " + ec.message());
  write_file_atomically(path, text);
}

std::vector<std::string> entry_files(const std::string& dir, const char* kind) {
  std::vector<std::string> files;
  std::error_code ec;
  const fs::path root = fs::path(dir) / kind;
  if (dir.empty() || !fs::is_directory(root, ec)) return files;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.path().extension() == ".json" && e.path().filename().string()[0] != '.') files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace decision_cache

}  // namespace accelkit
