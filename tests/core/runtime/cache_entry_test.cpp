// The decision cache against what a user's disk may hold: entries that are no entries (a FIFO,
// a socket, a directory, an oversized or garbage file) and cache directories that cannot be used
// (a regular file, a 5,000-character path, a read-only or uncreatable directory). Each is said
// in one line, nothing waits or crashes, and the decision is still made (the AdamW choice
// through the built CPU plugin). A call that could hang on a FIFO runs on a thread with a
// deadline, so that a hang fails the test instead of blocking it.
#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "accelkit/adamw_choice.hpp"
#include "accelkit/base/json_entry.hpp"
#include "accelkit/decision_cache.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/tensor_cache.hpp"
#include "cpu_runtime.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace cache_entry_suite {

using namespace accelkit;
using accelkit::test::contains;
namespace fs = std::filesystem;

namespace {

// What this process writes to stderr while this lives (accelkit's logger among it), read back
// line by line; stderr is restored when it goes.
class LogLines {
 public:
  LogLines() : file_(dir_.path() / "stderr") {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(saved_ >= 0);
    REQUIRE(fd >= 0);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~LogLines() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
  }
  LogLines(const LogLines&) = delete;
  LogLines& operator=(const LogLines&) = delete;

  std::vector<std::string> with(const std::string& needle) const {
    std::vector<std::string> out;
    std::istringstream in(all());
    for (std::string line; std::getline(in, line);)
      if (contains(line, needle)) out.push_back(line);
    return out;
  }
  std::string all() const {
    std::fflush(stderr);
    std::ifstream in(file_, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  test::TempDir dir_{"accelkit-cache-log"};
  fs::path file_;
  int saved_ = -1;
};

// Runs `work` on a thread of its own; false when it has not returned within `seconds`. A call
// stuck opening the FIFO `fifo` (waiting for a writer) is then released by opening it for
// writing here, so that the test fails instead of waiting for ever.
bool returns_in_time(const fs::path& fifo, int seconds, const std::function<void()>& work) {
  std::atomic<bool> done{false};
  std::string error;
  std::thread worker([&] {
    try {
      work();
    } catch (const std::exception& e) {
      error = e.what();
    }
    done = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!done && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool in_time = done;
  if (!in_time) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  worker.join();
  INFO("the call threw: " << error);
  CHECK(error.empty());
  return in_time;
}

// A Unix socket bound at `path` (closed, the name stays).
void make_socket(const fs::path& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  REQUIRE(path.string().size() < sizeof a.sun_path);
  std::strcpy(a.sun_path, path.c_str());
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
  ::close(fd);
}

// What decision_cache::list_entries needs of a decision.
struct Entry {
  std::string origin, cache_file, why, created;
};

}  // namespace

TEST_CASE("decision-cache entries: a FIFO, a socket, a directory or an oversized file is no entry, never waited on") {
  test::TempDir tmp("accelkit-cache-entry");
  const fs::path kind = tmp.make_dir("kind");
  std::string problem = "stale";

  CHECK_FALSE(decision_cache::read_entry_text((kind / "missing.json").string(), &problem).has_value());
  CHECK(problem.empty());  // none: nothing to say

  const fs::path fifo = kind / "a-fifo.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  std::optional<std::string> text;
  REQUIRE(returns_in_time(fifo, 30, [&] { text = decision_cache::read_entry_text(fifo.string(), &problem); }));
  CHECK_FALSE(text.has_value());
  CHECK(problem == "not a regular file (a FIFO)");

  make_socket(kind / "b-socket.json");
  CHECK_FALSE(decision_cache::read_entry_text((kind / "b-socket.json").string(), &problem).has_value());
  CHECK(problem == "not a regular file (a socket)");

  fs::create_directory(kind / "c-dir.json");
  CHECK_FALSE(decision_cache::read_entry_text((kind / "c-dir.json").string(), &problem).has_value());
  CHECK(problem == "not a regular file (a directory)");

  test::write_file(kind / "d-big.json", std::string(decision_cache::kEntryLimit + 1, ' '));
  CHECK_FALSE(decision_cache::read_entry_text((kind / "d-big.json").string(), &problem).has_value());
  CHECK(problem == "larger than 1 MiB, which no entry is");

  // Garbage is read, and refused by the parse, saying why.
  test::write_file(kind / "e-garbage.json", "\x01\x02 not json");
  const auto parse = [](const nlohmann::json&) { return Entry{}; };
  CHECK_FALSE(decision_cache::read_json_entry<Entry>((kind / "e-garbage.json").string(), 1, &problem, parse));
  CHECK(contains(problem, "parse error"));
  CHECK(decision_cache::read_entry_text((kind / "e-garbage.json").string(), &problem).has_value());

  // Listed, each is an entry that cannot be used, with the reason (the FIFO not waited on).
  std::vector<Entry> listed;
  REQUIRE(returns_in_time(fifo, 30, [&] {
    listed = decision_cache::list_entries<Entry>(tmp.str(), "kind", [&](const std::string& path, std::string* why) {
      return decision_cache::read_json_entry<Entry>(path, 1, why, parse);
    });
  }));
  REQUIRE(listed.size() == 5);
  for (const Entry& e : listed) CHECK(e.origin == "corrupt");
  std::sort(listed.begin(), listed.end(), [](const Entry& a, const Entry& b) { return a.cache_file < b.cache_file; });
  CHECK(listed[0].why == "not a regular file (a FIFO)");
  CHECK(listed[1].why == "not a regular file (a socket)");
  CHECK(listed[2].why == "not a regular file (a directory)");
  CHECK(listed[3].why == "larger than 1 MiB, which no entry is");
  CHECK(contains(listed[4].why, "parse error"));
  CHECK(fs::is_fifo(fifo));  // reading leaves it alone
}

TEST_CASE("the AdamW choice: a FIFO, garbage or oversized entry is said in one line, measured again and replaced") {
  test::TempDir cache("accelkit-cache-entry");
  test::ScopedEnv env("ACCELKIT_CACHE_DIR", cache.str());
  test::FakeProcStat quiet;  // timings on a machine that reads quiet are cached
  std::unique_ptr<Runtime> rt = test::start_cpu_runtime({{"threads", "1"}});
  auto optimizer = rt->device_handle()->optimizer();
  REQUIRE(optimizer.ok());
  if (optimizer.value()->adamw_implementations().size() < 2) {
    MESSAGE("skipped: this LibTorch has no fused AdamW of its own, so the CPU plugin offers one implementation, "
            "which is never measured or cached (the entries' reads are covered above)");
    return;
  }
  auto choose = [&] { return choose_adamw_implementation(rt->context(), *optimizer.value(), c10::kCPU, true); };
  const AdamWImplChoice first = choose();
  REQUIRE(first.origin == "benchmark");
  const fs::path entry = first.cache_file;
  REQUIRE(fs::is_regular_file(entry));

  auto check_replaced = [&](const std::string& what, const std::string& said) {
    CAPTURE(what);
    LogLines log;
    AdamWImplChoice c;
    REQUIRE(returns_in_time(entry, 60, [&] { c = choose(); }));
    CHECK(c.origin == "benchmark");
    CHECK(c.cache_file == entry.string());
    const auto lines = log.with(entry.string());
    INFO(log.all());
    REQUIRE(lines.size() == 1);
    CHECK(contains(lines[0], "adamw: ignoring the cache entry"));
    CHECK(contains(lines[0], said));
    CHECK(fs::is_regular_file(entry));
    CHECK(choose().origin == "cache");  // the new entry, renamed over the old name
  };

  fs::remove(entry);
  REQUIRE(::mkfifo(entry.c_str(), 0644) == 0);
  // Looked up without measuring: none, at once.
  AdamWImplChoice looked_up;
  REQUIRE(returns_in_time(entry, 30, [&] { looked_up = cached_adamw_implementation(rt->context(), *optimizer.value()); }));
  CHECK(looked_up.origin.empty());
  check_replaced("a FIFO", "not a regular file (a FIFO)");

  test::write_file(entry, "\x7f" "ELF garbage, no JSON");
  check_replaced("garbage", "unreadable: ");

  test::write_file(entry, std::string(2u << 20, '{'));
  check_replaced("2 MiB", "larger than 1 MiB");
}

namespace {

// decision_cache::dir_problem(dir) as the user `uid` sees it, asked in a child process that
// takes that user; "" when it can be used.
std::string dir_problem_as(uid_t uid, const std::string& dir) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(3);
    const std::string why = decision_cache::dir_problem(dir);
    const bool written = ::write(fds[1], why.data(), why.size()) == static_cast<ssize_t>(why.size());
    ::_exit(written ? 0 : 4);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return out;
}

}  // namespace

TEST_CASE("the cache directory: what makes one unusable") {
  test::TempDir tmp("accelkit-cache-entry");
  using decision_cache::dir_problem;
  CHECK(dir_problem(tmp.str()).empty());
  CHECK(dir_problem((tmp.path() / "missing" / "deeper").string()).empty());  // made by the first write
  test::write_file(tmp.path() / "file", "x");
  CHECK(dir_problem((tmp.path() / "file").string()) == "Not a directory");
  CHECK(dir_problem((tmp.path() / "file" / "sub").string()) == "Not a directory");
  CHECK(dir_problem(tmp.str() + "/" + std::string(5000, 'x')) == "File name too long");
  CHECK(dir_problem(tmp.str() + "/" + std::string(300, 'x')) == "File name too long");  // one name over NAME_MAX

  const fs::path ro = tmp.make_dir("ro");
  test::set_mode(tmp.path(), 0755);
  test::set_mode(ro, 0555);
  // Root writes into a mode 0555 directory all the same (and so may the cache); an ordinary
  // user cannot, so the question is asked as one.
  const uid_t user = ::geteuid() == 0 ? 65534 : ::geteuid();
  CHECK(dir_problem_as(user, ro.string()) == "Permission denied");
  CHECK(dir_problem_as(user, (ro / "sub").string()) == "cannot be created in " + ro.string() + ": Permission denied");
  CHECK(dir_problem_as(user, tmp.str()) == (user == ::geteuid() ? "" : "Permission denied"));
}

TEST_CASE("a cache directory that cannot be used: caching is off with one warning for the process; decisions still made") {
  test::TempDir tmp("accelkit-cache-entry");
  test::write_file(tmp.path() / "file", "x");
  test::FakeProcStat quiet;
  std::unique_ptr<Runtime> rt = test::start_cpu_runtime({{"threads", "1"}});
  auto optimizer = rt->device_handle()->optimizer();
  REQUIRE(optimizer.ok());

  struct Case {
    std::string dir, why;
  };
  const std::vector<Case> cases = {{(tmp.path() / "file").string(), "Not a directory"},
                                   {(tmp.path() / "file" / "sub").string(), "Not a directory"},
                                   {tmp.str() + "/" + std::string(5000, 'y'), "File name too long"}};
  for (const Case& c : cases) {
    CAPTURE(c.why);
    test::ScopedEnv env("ACCELKIT_CACHE_DIR", c.dir);
    LogLines log;
    for (int i = 0; i < 3; ++i) {
      std::string why_off;
      CHECK(decision_cache_dir(&why_off).empty());
      CHECK(contains(why_off, c.why));
      CHECK(decision_cache_dir().empty());
    }
    // Each cache uses it: the AdamW choice (measured each time, kept nowhere), the tensor cache.
    for (int i = 0; i < 2; ++i) {
      const AdamWImplChoice a = choose_adamw_implementation(rt->context(), *optimizer.value(), c10::kCPU, true);
      CHECK(a.origin != "cache");
      CHECK(a.cache_file.empty());
    }
    TensorCacheOptions o;
    int tensor_warnings = 0;
    o.warn = [&](const std::string&) { ++tensor_warnings; };
    TensorCache tensors(o);
    CHECK_FALSE(tensors.enabled());
    CHECK(contains(tensors.disabled_reason(), c.why));
    CHECK(tensor_warnings == 0);

    INFO(log.all());
    const auto off = log.with("caching is off");
    REQUIRE(off.size() == 1);
    CHECK(contains(off[0], c.why));
    CHECK(contains(off[0], c.dir.substr(0, 100)));
    CHECK(off[0].size() < 400);  // the 5,000-character path shortened
    CHECK(log.with("cache").size() == 1);  // no cache's own warning besides
  }
}

}  // namespace cache_entry_suite
