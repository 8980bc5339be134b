#include "accelkit/decision_cache.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "accelkit/atomic_file.hpp"
#include "accelkit/sdk/host_paths.hpp"

namespace accelkit {

namespace fs = std::filesystem;

std::string decision_cache_dir() {
  const char* dir = secure_env("ACCELKIT_CACHE_DIR");
  if (dir && *dir) return dir;
  const char* xdg = secure_env("XDG_CACHE_HOME");
  if (xdg && *xdg == '/') return std::string(xdg) + "/accelkit";  // the spec ignores relative values
  const char* home = secure_env("HOME");
  if (home && *home) return std::string(home) + "/.cache/accelkit";
  return {};
}

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


std::optional<std::string> read_entry_text(const std::string& path, std::string* problem) {
  problem->clear();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno != ENOENT) *problem = std::string("cannot open: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
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
