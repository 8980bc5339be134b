// dist::run_local_workers (distributed.hpp): N local workers with torchrun's variables, for
// `accelkit train --nproc-per-node N` and the programs that start their own ranks.
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "accelkit/distributed.hpp"

extern char** environ;  // POSIX: declared by no header

namespace accelkit::dist {

namespace {

volatile std::sig_atomic_t g_launcher_forward = 0;  // a signal to pass on to the workers

void launcher_on_signal(int sig) { g_launcher_forward = sig; }

// A TCP port free on loopback now (the rendezvous binds it a moment later).
int launcher_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error(std::string("no free port on 127.0.0.1: ") + std::strerror(errno));
  return ntohs(a.sin_port);
}

int worker_exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

int run_local_workers(const std::vector<std::string>& args, int n, const std::function<void(const std::string&)>& say,
                      const std::vector<int>& agreed_stops) {
  if (args.empty() || n < 1) throw std::invalid_argument("run_local_workers: no command, or fewer than 1 worker");
  const std::string& self = args[0];
  const char* port_env = std::getenv("MASTER_PORT");
  int port = 0;
  if (port_env && *port_env) {
    std::size_t used = 0;
    try {
      port = std::stoi(port_env, &used);
    } catch (const std::exception&) {
      port = 0;
    }
    if (port < 1 || port > 65535 || port_env[used] != '\0')
      throw LaunchError("MASTER_PORT=" + std::string(port_env) + " is not a TCP port");
  } else {
    port = launcher_free_port();
  }
  if (say)
    say(std::to_string(n) + " data-parallel workers on this machine (ranks 0-" + std::to_string(n - 1) +
        ", rendezvous at 127.0.0.1:" + std::to_string(port) + ")");

  static const char* const kOwn[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                     "MASTER_PORT"};
  std::vector<std::string> base;
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    const std::string key = kv.substr(0, kv.find('='));
    bool own = false;
    for (const char* k : kOwn) own = own || key == k;
    if (!own) base.push_back(kv);
  }

  struct sigaction forward {}, ignore {}, old_int {}, old_term {};
  forward.sa_handler = launcher_on_signal;
  sigemptyset(&forward.sa_mask);
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  g_launcher_forward = 0;
  sigaction(SIGINT, &ignore, &old_int);  // the terminal sends Ctrl-C to every worker itself
  sigaction(SIGTERM, &forward, &old_term);

  std::vector<pid_t> pids;
  int first_failure = 0;
  for (int rank = 0; rank < n; ++rank) {
    std::vector<std::string> env = base;
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("WORLD_SIZE=" + std::to_string(n));
    env.push_back("LOCAL_RANK=" + std::to_string(rank));
    env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(n));
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
    std::vector<char*> argv, envp;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (auto& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    pid_t pid = -1;
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    posix_spawnattr_setsigdefault(&attr, &defaults);  // the workers handle them as `train` does
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    const int rc = posix_spawn(&pid, self.c_str(), nullptr, &attr, argv.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      if (say) say("starting worker " + std::to_string(rank) + " (" + self + "): " + std::strerror(rc));
      first_failure = 1;
      break;
    }
    pids.push_back(pid);
  }

  std::vector<bool> done(pids.size(), false);
  std::size_t left = pids.size();
  bool killing = false;  // SIGKILL what is left at kill_at
  auto kill_at = std::chrono::steady_clock::now();
  bool terming = false;  // SIGTERM what is left at term_at (after an agreed stop)
  auto term_at = kill_at;
  auto stop_others = [&](int sig) {
    for (std::size_t i = 0; i < pids.size(); ++i)
      if (!done[i]) ::kill(pids[i], sig);
  };
  if (first_failure != 0) {
    stop_others(SIGTERM);
    killing = true;
    kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  }
  while (left > 0) {
    if (g_launcher_forward != 0) {
      stop_others(g_launcher_forward);
      g_launcher_forward = 0;
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] != pid || done[i]) continue;
        done[i] = true;
        --left;
        const int code = worker_exit_code(status);
        if (code != 0 && first_failure == 0) {
          first_failure = code;
          if (left > 0 && std::find(agreed_stops.begin(), agreed_stops.end(), code) != agreed_stops.end()) {
            // The others stop after the same step by themselves; SIGTERM only if they hang.
            terming = true;
            term_at = std::chrono::steady_clock::now() + std::chrono::seconds(60);
          } else if (left > 0) {
            if (say) say("worker " + std::to_string(i) + " ended with exit code " + std::to_string(code) + "; stopping the others");
            stop_others(SIGTERM);
            killing = true;
            kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(15);
          }
        }
      }
      continue;
    }
    if (terming && std::chrono::steady_clock::now() > term_at) {
      if (say) say("the other workers did not end within 60 s of an agreed stop; stopping them");
      stop_others(SIGTERM);
      terming = false;
      killing = true;
      kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    }
    if (killing && std::chrono::steady_clock::now() > kill_at) {
      stop_others(SIGKILL);
      killing = false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return first_failure;
}

}  // namespace accelkit::dist
