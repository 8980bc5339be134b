// The out-of-process plugin scan (plugin_scan.hpp): the child, its verdict, the registry.
#include "install_layout.hpp"
#include "plugin_scan.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "accelkit/atomic_file.hpp"
#include "accelkit/loader.hpp"
#include "accelkit/sdk/abi.h"
#include "accelkit/sdk/host_paths.hpp"
#include "accelkit/version.hpp"
#include "accelkit/decision_cache.hpp"
#include "accelkit/machine_load.hpp"
#include "accelkit/sdk/support/host_file.hpp"
#include "accelkit/base/strings.hpp"

extern char** environ;  // POSIX: declared by no header

namespace accelkit::scan {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kScannerName = "accelkit-plugin-scanner";
constexpr std::size_t kKeptOutput = 4096;  // the child's last output kept for the reason

std::string executable_dir() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// "was killed by SIGSEGV (Segmentation fault)".
std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = strsignal(sig);
  return std::string("was killed by ") + (abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig)) +
         (desc ? std::string(" (") + desc + ")" : "");
}

// What the child's output says about an exception that reached std::terminate, or "".
std::string terminate_text(const std::string& output) {
  const auto at = output.find("terminate called after throwing an instance of '");
  if (at == std::string::npos) return {};
  const auto begin = at + std::strlen("terminate called after throwing an instance of '");
  const auto end = output.find('\'', begin);
  std::string what = output.substr(begin, end == std::string::npos ? 60 : end - begin);
  if (auto w = output.find("what():", begin); w != std::string::npos) {
    std::string text = output.substr(w + 7);
    text = text.substr(0, text.find('\n'));
    while (!text.empty() && text.front() == ' ') text.erase(0, 1);
    what += ": " + text;
  }
  return "an exception (" + text::shorten(what, 120) + ") escaped a noexcept entry point, so std::terminate ended it";
}

// The last non-empty line of the child's output, shortened; "" when it printed nothing.
std::string last_line(const std::string& output) {
  std::istringstream in(output);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last.empty() ? std::string() : text::shorten(last, 160);
}

// Reads what is ready on `fd` into `into` (keeping the last `keep` bytes); false at EOF.
bool drain(int fd, std::string& into, std::size_t keep) {
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) {
    into.append(buf, static_cast<std::size_t>(n));
    if (into.size() > keep) into.erase(0, into.size() - keep);
    return true;
  }
  return n < 0 && (errno == EINTR || errno == EAGAIN);
}

struct Child {
  pid_t pid = -1;
  int result_fd = -1;
  int output_fd = -1;
};

// Starts `scanner --scan <plugin> [--memory N]` in a process group of its own, its result on
// kResultFd and its stdout and stderr on one pipe. "" or why it could not.
std::string spawn(const std::string& scanner, const std::string& plugin, const ScanLimits& limits, Child& child) {
  int result[2], output[2];
  if (::pipe2(result, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  if (::pipe2(output, O_CLOEXEC) != 0) {
    ::close(result[0]);
    ::close(result[1]);
    return std::string("pipe: ") + std::strerror(errno);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, result[1], kResultFd);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  const std::string memory = std::to_string(limits.memory_bytes);
  std::vector<char*> argv = {const_cast<char*>(scanner.c_str()), const_cast<char*>("--scan"),
                             const_cast<char*>(plugin.c_str()), const_cast<char*>("--memory"),
                             const_cast<char*>(memory.c_str()), nullptr};
  const int rc = ::posix_spawn(&child.pid, scanner.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(result[1]);
  ::close(output[1]);
  if (rc != 0) {
    ::close(result[0]);
    ::close(output[0]);
    return "cannot start " + scanner + ": " + std::strerror(rc);
  }
  child.result_fd = result[0];
  child.output_fd = output[0];
  return {};
}

// Collects the child's result and output until both pipes close or the deadline passes.
bool collect(const Child& child, Clock::time_point deadline, std::string& result, std::string& output) {
  bool result_open = true, output_open = true;
  while (result_open || output_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd fds[2] = {{result_open ? child.result_fd : -1, POLLIN, 0}, {output_open ? child.output_fd : -1, POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno != EINTR) return false;
    if (n <= 0) continue;
    if (result_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) result_open = drain(child.result_fd, result, 64 * 1024);
    if (output_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) output_open = drain(child.output_fd, output, kKeptOutput);
  }
  return true;
}

// Waits for the child to end, at most until `deadline`; false when it did not. `usage` is the
// child's, once it ended.
bool reap(pid_t pid, Clock::time_point deadline, int& status, rusage& usage) {
  for (;;) {
    const pid_t r = ::wait4(pid, &status, WNOHANG, &usage);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return false;
    if (Clock::now() >= deadline) return false;
    ::usleep(2000);
  }
}

double cpu_seconds(const rusage& r) {
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

int core_count() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Cores other processes kept busy while the child ran: the machine's busy time (/proc/stat,
// machine_load.hpp) less this process's and the child's own, over the wall time. -1: unknown.
double others_during(const std::optional<CpuSample>& before, const rusage& child) {
  const auto after = sample_cpu();
  if (!before || !after) return -1;
  const double wall = std::chrono::duration<double>(after->at - before->at).count();
  if (wall <= 0) return -1;
  const double others = other_cores(*before, *after) - cpu_seconds(child) / wall;
  return std::clamp(others, 0.0, static_cast<double>(core_count()));
}

// " while other processes kept 1.9 of the 2 cores busy", or why that is not known.
std::string load_text(double others, int cores) {
  if (others < 0) return " (the machine's load could not be read)";
  char buf[96];
  std::snprintf(buf, sizeof buf, " while other processes kept %.1f of the %d core%s busy", others, cores,
                cores == 1 ? "" : "s");
  return buf;
}

// How one child ended, before it is judged.
struct Ending {
  bool ended = false;  // by itself, within the timeout
  int status = 0;
  std::string result, output;
};

// The verdict on how the child ended (scan_in_child's, but for the timeout's wording).
void judge(const Ending& e, int timeout, Verdict& v) {
  const std::string said = last_line(e.output);
  const std::string tail = said.empty() ? "" : " (its last output: " + said + ")";
  if (!e.ended) {
    v.timed_out = true;
    v.reason = "did not finish within " + std::to_string(timeout) + " s (plugin_scan_timeout) and was killed" + tail;
  } else if (WIFSIGNALED(e.status)) {
    const std::string why = terminate_text(e.output);
    v.reason = signal_text(WTERMSIG(e.status)) + (why.empty() ? tail : ": " + why);
  } else if (WIFEXITED(e.status) && WEXITSTATUS(e.status) != 0) {
    v.reason = "ended the process with exit status " + std::to_string(WEXITSTATUS(e.status)) + tail;
  } else if (e.result.compare(0, std::strlen(kPassedLine), kPassedLine) != 0) {
    v.reason = "ended the process (exit status 0) before the examination finished: a plugin must never end it" + tail;
  } else if (const std::size_t at = e.result.find(std::string("\n") + kTableLine); at != std::string::npos) {
    const std::size_t from = at + 1 + std::strlen(kTableLine);
    v.reason = e.result.substr(from, e.result.find('\n', from) - from);
  } else {
    v.passed = true;
  }
}

}  // namespace

std::string find_scanner(std::string* looked) {
  std::vector<std::pair<std::string, std::string>> candidates;  // path, where from
  if (const char* env = secure_env("ACCELKIT_PLUGIN_SCANNER"); env && *env)
    candidates.emplace_back(env, "ACCELKIT_PLUGIN_SCANNER");
  if (const std::string exe = executable_dir(); !exe.empty()) {
    candidates.emplace_back(exe + "/" + kScannerName, "next to the executable");
    candidates.emplace_back(exe + "/../" ACCELKIT_INSTALL_LIBEXECDIR_RELATIVE "/accelkit/" + kScannerName,
                            "executable-relative");
  }
  if (const std::string d = install_layout::libexec_dir(); !d.empty())
    candidates.emplace_back(d + "/" + kScannerName, "installed package");
  candidates.emplace_back(std::string(ACCELKIT_INSTALL_LIBEXEC_DIR) + "/" + kScannerName, "installed");
  candidates.emplace_back(std::string(ACCELKIT_PACKAGE_LIBEXEC_DIR) + "/" + kScannerName, "package");
  std::string tried;
  for (const auto& [path, from] : candidates) {
    std::error_code ec;
    const bool exists = fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
    std::string why = !exists ? "not there" : insecure_path_reason(fs::absolute(path).string());
    if (exists && why.empty()) return fs::absolute(path).lexically_normal().string();
    tried += (tried.empty() ? "" : "; ") + path + " (" + from + "): " + (exists ? "refused as insecure: " + why : why);
  }
  if (looked) *looked = tried;
  return {};
}

Verdict scan_in_child(const std::string& scanner, const std::string& plugin, const ScanLimits& limits) {
  Verdict v;
  v.scanned = decision_cache::utc_now();
  const std::optional<CpuSample> before = sample_cpu();
  const auto start = Clock::now();
  Child child;
  if (std::string why = spawn(scanner, plugin, limits, child); !why.empty()) {
    v.reason = "could not be examined: " + why;
    return v;
  }
  const int timeout = limits.timeout_s > 0 ? limits.timeout_s : 10;
  const auto deadline = start + std::chrono::seconds(timeout);
  Ending e;
  rusage usage {};
  const bool finished = collect(child, deadline, e.result, e.output);
  e.ended = finished && reap(child.pid, deadline, e.status, usage);
  if (!e.ended) {
    ::kill(-child.pid, SIGKILL);  // the whole group: whatever the plugin started goes too
    ::kill(child.pid, SIGKILL);
    while (::wait4(child.pid, &e.status, 0, &usage) < 0 && errno == EINTR) {
    }
  }
  ::close(child.result_fd);
  ::close(child.output_fd);
  v.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  v.others = others_during(before, usage);
  judge(e, timeout, v);
  return v;
}

int retry_timeout_s(int timeout_s, double others, int cores) {
  const double all = std::max(1, cores);
  double factor = 4;
  if (others >= 0) factor = std::clamp(all / std::max(all - others, all / 8), 2.0, 8.0);
  const long longer = static_cast<long>(std::ceil(timeout_s * factor));
  return static_cast<int>(longer <= 600 ? longer : std::max(600L, 2L * timeout_s));
}

Verdict scan_with_retry(const std::string& scanner, const std::string& plugin, const ScanLimits& limits) {
  Verdict first = scan_in_child(scanner, plugin, limits);
  if (!first.timed_out) return first;
  const int cores = core_count();
  const int timeout = limits.timeout_s > 0 ? limits.timeout_s : 10;
  ScanLimits longer = limits;
  longer.timeout_s = retry_timeout_s(timeout, first.others, cores);
  Verdict second = scan_in_child(scanner, plugin, longer);
  second.ms += first.ms;
  const std::string load = load_text(first.others, cores);
  const std::string first_try =
      "the first try ran out of its " + std::to_string(timeout) + " s (plugin_scan_timeout)" + load;
  if (second.passed) {
    second.note = "on a second try of " + std::to_string(longer.timeout_s) + " s: " + first_try;
  } else if (second.timed_out) {
    const std::string killed = "and was killed";
    const std::size_t tail = second.reason.find(killed);
    second.reason = "did not finish within " + std::to_string(timeout) + " s (plugin_scan_timeout)" + load +
                    ", nor within " + std::to_string(longer.timeout_s) + " s on a second try, " +
                    (tail == std::string::npos ? killed : second.reason.substr(tail));
  } else {
    second.reason += " (on a second try of " + std::to_string(longer.timeout_s) + " s: " + first_try + ")";
  }
  return second;
}

// ---- the registry --------------------------------------------------------------------------

std::string host_fingerprint() {
  return std::string("accelkit ") + ACCELKIT_VERSION_STRING + "; LibTorch " + TORCH_VERSION + "; ABI " +
         std::to_string(ACCELKIT_ABI_MAJOR) + "." + std::to_string(ACCELKIT_ABI_MINOR);
}

namespace {

// 2: with "timeout" (a verdict kept until the next run only) and "note".
constexpr int kFormat = 2;

bool file_stamp(const std::string& path, std::uint64_t& size, std::int64_t& mtime_ns) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  size = static_cast<std::uint64_t>(st.st_size);
  mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return true;
}

}  // namespace

std::string registry_path(const std::string& cache_dir) {
  return (fs::path(cache_dir) / "plugins" / ("registry-" + decision_cache::hash_hex(host_fingerprint()) + ".json")).string();
}

Registry::Registry(std::string cache_dir) {
  if (cache_dir.empty()) return;
  path_ = registry_path(cache_dir);
  const host::ReadResult r = host::read_file_upto(path_, kRegistryLimit);
  if (r.error == ENOENT) return;  // none yet
  if (!r.ok()) {
    problem_ = host::failure(r);
    // A directory there, or a file in place of plugins/: nothing can be written, so nothing is
    // tried (one line says it all).
    if (r.error == ENOTDIR || (r.error == host::kNotRegular && std::string_view(r.not_regular) == "a directory")) {
      keep_ = false;
      problem_ += ", so no verdict is kept";
    }
    return;
  }
  if (r.truncated) {
    problem_ = "larger than " + std::to_string(kRegistryLimit >> 20) + " MiB, which no registry is";
    return;
  }
  try {
    load(r.text);
  } catch (const std::exception& e) {
    entries_.clear();
    problem_ = std::string("unreadable (") + text::shorten(e.what(), 120) + ")";
  }
}

// The entries of the registry's text; throws what nlohmann::json says of a malformed one.
void Registry::load(const std::string& text) {
  const auto j = nlohmann::json::parse(text);
  if (j.at("format").get<int>() != kFormat) {
    problem_ = "format " + std::to_string(j.at("format").get<int>()) + ", expected " + std::to_string(kFormat);
    return;
  }
  if (j.at("host").get<std::string>() != host_fingerprint()) {
    problem_ = "written by another host (" + text::shorten(j.at("host").get<std::string>(), 120) + ")";
    return;
  }
  for (const auto& [plugin, e] : j.at("plugins").items()) {
    Entry entry;
    entry.size = e.at("size").get<std::uint64_t>();
    entry.mtime_ns = e.at("mtime_ns").get<std::int64_t>();
    entry.verdict.passed = e.at("passed").get<bool>();
    entry.verdict.timed_out = e.at("timeout").get<bool>();
    entry.verdict.reason = e.at("reason").get<std::string>();
    entry.verdict.note = e.value("note", std::string());
    entry.verdict.scanned = e.at("scanned").get<std::string>();
    entry.verdict.ms = e.at("ms").get<double>();
    entries_[plugin] = std::move(entry);
  }
}

std::optional<Verdict> Registry::lookup(const std::string& plugin) const {
  auto it = entries_.find(plugin);
  if (it == entries_.end()) return std::nullopt;
  std::uint64_t size = 0;
  std::int64_t mtime = 0;
  if (!file_stamp(plugin, size, mtime) || size != it->second.size || mtime != it->second.mtime_ns) return std::nullopt;
  return it->second.verdict;
}

void Registry::record(const std::string& plugin, const Verdict& verdict) {
  Entry e;
  if (!file_stamp(plugin, e.size, e.mtime_ns)) return;
  e.verdict = verdict;
  entries_[plugin] = std::move(e);
  dirty_ = true;
}

std::string Registry::save() {
  if (!dirty_ || path_.empty() || !keep_) return {};
  for (auto it = entries_.begin(); it != entries_.end();) {  // files gone since: forgotten
    std::error_code ec;
    it = fs::exists(it->first, ec) ? std::next(it) : entries_.erase(it);
  }
  nlohmann::json plugins = nlohmann::json::object();
  for (const auto& [plugin, e] : entries_)
    plugins[plugin] = {{"size", e.size},           {"mtime_ns", e.mtime_ns},       {"passed", e.verdict.passed},
                       {"timeout", e.verdict.timed_out}, {"reason", e.verdict.reason}, {"note", e.verdict.note},
                       {"scanned", e.verdict.scanned}, {"ms", e.verdict.ms}};
  const nlohmann::json j = {{"format", kFormat}, {"host", host_fingerprint()}, {"plugins", std::move(plugins)}};
  try {
    std::error_code ec;
    fs::create_directories(fs::path(path_).parent_path(), ec);
    write_file_atomically(path_, j.dump(2) + "\n");
  } catch (const std::exception& e) {
    return e.what();
  }
  dirty_ = false;
  return {};
}

}  // namespace accelkit::scan
