// Running the built accelkit CLI as a subprocess, for the suites that test it from outside:
// its environment cleaned of ACCELKIT_* (but the build tree's cache directory kept, so no test
// writes the user's ~/.cache), a private copy of the CPU plugin on the plugin path, stdout and
// stderr captured. Needs ACCELKIT_CLI_PATH and ACCELKIT_CPU_PLUGIN_DIR from the build.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "test_support.hpp"

extern char** environ;  // POSIX: declared by no header

namespace accelkit::test {

inline const std::string kCli = ACCELKIT_CLI_PATH;

// A private directory (mode 0755, files 0644) holding copies of the named built plugins, so the
// loader never refuses them for the build tree's permissions. Made once per set of names.
inline std::string private_plugin_dir(const std::vector<std::string>& names) {
  static std::map<std::vector<std::string>, std::string> made;
  if (auto it = made.find(names); it != made.end()) return it->second;
  static std::vector<std::unique_ptr<TempDir>> dirs;
  dirs.push_back(std::make_unique<TempDir>("accelkit-cli-plugins"));
  const fs::path to = dirs.back()->path() / "plugins";
  fs::create_directories(to);
  set_mode(to, 0755);
  for (const auto& name : names) {
    const fs::path so = to / ("libaccelkit-" + name + ".so");
    fs::copy_file(fs::path(ACCELKIT_CPU_PLUGIN_DIR) / so.filename(), so);
    set_mode(so, 0644);
  }
  return made[names] = to.string();
}

// The same with only the CPU plugin (the build's plugin directory also holds the cuda and
// rocm plugins, whose names the fake plugins use).
inline const std::string& cpu_plugin_dir() {
  static const std::string dir = private_plugin_dir({"cpu"});
  return dir;
}

struct RunResult {
  int code = -1;  // exit status, or 128 + signal
  std::string out;
  std::string err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

using EnvOverrides = std::vector<std::pair<std::string, std::optional<std::string>>>;

// A CLI process started with posix_spawn, stdout and stderr going to files.
class CliProcess {
 public:
  // The environment is this process's without any ACCELKIT_* variable, plus
  // ACCELKIT_PLUGIN_PATH = the CPU plugin's directory and this process's ACCELKIT_CACHE_DIR,
  // then `env` (nullopt unsets).
  CliProcess(const std::vector<std::string>& args, const EnvOverrides& env) : tmp_("accelkit-cli-run") {
    std::map<std::string, std::optional<std::string>> vars;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const auto eq = kv.find('=');
      if (eq == std::string::npos || kv.rfind("ACCELKIT_", 0) == 0) continue;
      vars[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    vars["ACCELKIT_PLUGIN_PATH"] = cpu_plugin_dir();
    if (const char* cache = std::getenv("ACCELKIT_CACHE_DIR")) vars["ACCELKIT_CACHE_DIR"] = cache;
    for (const auto& [k, v] : env) vars[k] = v;
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : vars)
      if (v) env_strings.push_back(k + "=" + *v);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);

    std::vector<std::string> argv_strings{kCli};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int rc = posix_spawn(&pid_, kCli.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("posix_spawn " + kCli + ": " + std::strerror(rc));
  }
  ~CliProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  pid_t pid() const noexcept { return pid_; }
  std::string out() const { return slurp(out_path()); }

  // Waits for exit: status (or 128 + signal) and what it printed.
  RunResult wait() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    RunResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out_path());
    r.err = slurp(err_path());
    return r;
  }

 private:
  std::string out_path() const { return (tmp_.path() / "out").string(); }
  std::string err_path() const { return (tmp_.path() / "err").string(); }
  TempDir tmp_;
  pid_t pid_ = -1;
};

inline RunResult run_cli(const std::vector<std::string>& args, const EnvOverrides& env = {}) {
  CliProcess p(args, env);
  return p.wait();
}

inline std::string describe(const RunResult& r) {
  return "exit " + std::to_string(r.code) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

}  // namespace accelkit::test
