// The out-of-process plugin scan: a plugin file's handshake and probe run first in a child
// process (the accelkit-plugin-scanner helper), so a plugin that crashes, hangs, aborts or
// exits while being examined costs the host nothing but a refusal with the reason. The
// verdict is kept in a registry under the cache directory, keyed by the file's path, size and
// modification time and the host's versions; the host then loads only plugins whose scan
// passed, and a failed one stays refused until its file changes (or a rescan is asked for).
// Running out of time is not such a verdict: a machine busy for a moment (eight commands
// started at once on two cores) makes any plugin slow. A child that runs out of time is given a
// second, longer try at once (scan_with_retry), and a plugin that runs out of that one too is
// refused for this run only: the registry marks the verdict a timeout, and the next run scans
// the plugin again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace accelkit::scan {

// How a child is run.
struct ScanLimits {
  int timeout_s = 10;                 // wall-clock, then SIGKILL
  std::uint64_t memory_bytes = 0;     // the child's data limit (RLIMIT_DATA); 0 = none
};

// One scan's outcome.
struct Verdict {
  bool passed = false;     // the child finished the handshake and probe and said so
  bool timed_out = false;  // it was killed for running out of time (kept until the next run only)
  std::string reason;      // when not, what it did: "was killed by SIGSEGV (...)", "did not finish within 10 s ..."
  std::string note;        // when it passed on a second try, why that was needed ("" otherwise)
  std::string scanned;     // UTC, ISO 8601
  double ms = 0;           // how long the child ran (both tries, when there were two)
  double others = -1;      // cores other processes kept busy while it ran (-1: unknown); not kept
};

// The scanner helper to run, found as the loader finds plugins (scanner_search_paths()):
// "" when there is none, with where it looked in `looked`.
std::string find_scanner(std::string* looked);

// Runs `scanner --scan <plugin>` and judges how it ended. Never throws for the plugin's
// behaviour; a failure to start the child is a verdict too ("cannot start the scanner: ...").
Verdict scan_in_child(const std::string& scanner, const std::string& plugin, const ScanLimits& limits);

// scan_in_child, and when the child ran out of time, once more at once with the longer timeout
// of retry_timeout_s; a verdict of the second try says both tries' timeouts and the first
// one's load ("did not finish within 10 s (plugin_scan_timeout) while other processes kept 1.9
// of the 2 cores busy, nor within 80 s on a second try, and was killed").
Verdict scan_with_retry(const std::string& scanner, const std::string& plugin, const ScanLimits& limits);

// The second try's timeout after a first of `timeout_s` seconds during which other processes
// kept `others` of `cores` cores busy (-1: unknown): `timeout_s` times all the cores over those
// left free (at least an eighth of them), so between 2x and 8x (4x when the load is unknown),
// and at most 600 s unless 2x is more.
int retry_timeout_s(int timeout_s, double others, int cores);

// A later line of the result: a new device type's table is incomplete (new_device::table_problem);
// the plugin is refused with the rest of the line.
inline constexpr const char* kTableLine = "new-device-table: ";

// What the scanner prints on its result descriptor when the scan passed (the first line).
inline constexpr const char* kPassedLine = "accelkit-plugin-scan passed";
// The descriptor the child writes its result to (not its stdout: a plugin may print there).
inline constexpr int kResultFd = 3;

// The registry of verdicts: <cache dir>/plugins/registry-<hash of host_fingerprint()>.json,
// one per accelkit + LibTorch build, so that two installs sharing a cache directory (a
// virtual environment's LibTorch and the system's) keep their own. A file that cannot be read,
// is of another format or another host is rebuilt (the reason in `problem`), never trusted.
// It is read with the SDK's bounded reader (support/host_file.hpp): a regular file of at most
// kRegistryLimit bytes, opened non-blocking, so a FIFO, a directory or a huge file there is a
// problem of one line, never a wait.
inline constexpr std::size_t kRegistryLimit = 4u << 20;

std::string registry_path(const std::string& cache_dir);

class Registry {
 public:
  // Loads the registry under `cache_dir` ("" = no registry: nothing is kept).
  explicit Registry(std::string cache_dir);
  const std::string& path() const noexcept { return path_; }
  // Why the file on disk was not used, when it was not ("" otherwise).
  const std::string& problem() const noexcept { return problem_; }
  // The verdict recorded for `plugin` as its file is now; nullopt when there is none or the
  // file changed since. A timeout (Verdict::timed_out) is returned too: the caller scans again.
  std::optional<Verdict> lookup(const std::string& plugin) const;
  void record(const std::string& plugin, const Verdict& verdict);
  // Writes the registry when anything was recorded (atomically). Returns "" or why it could not.
  std::string save();

 private:
  struct Entry {
    std::uint64_t size = 0;
    std::int64_t mtime_ns = 0;
    Verdict verdict;
  };
  void load(const std::string& text);
  std::string path_;
  std::string problem_;
  bool keep_ = true;  // false when the registry's path cannot hold a file (a directory is there)
  std::map<std::string, Entry> entries_;
  bool dirty_ = false;
};

// The host's fingerprint a registry is valid for: accelkit, LibTorch and ABI versions.
std::string host_fingerprint();

}  // namespace accelkit::scan
