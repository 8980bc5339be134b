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
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "accelkit/distributed.hpp"

extern char** environ;  // POSIX: declared by no header

namespace accelkit::dist {

namespace {

// The stop signals the launcher passes on, and how many of each arrived while it waits.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kStopSignalCount = 3;
volatile std::sig_atomic_t g_launcher_received[kStopSignalCount] = {};

int stop_slot(int sig) { return sig == SIGINT ? 0 : sig == SIGTERM ? 1 : 2; }

const char* stop_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP"; }

// Runs with the other stop signals blocked.
void launcher_on_signal(int sig) {
  const int slot = stop_slot(sig);
  g_launcher_received[slot] = g_launcher_received[slot] + 1;
}

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

// The rendezvous port: MASTER_PORT where it is set (it must be a TCP port), else one free now.
int rendezvous_port() {
  const char* port_env = std::getenv("MASTER_PORT");
  if (!port_env || !*port_env) return launcher_free_port();
  int port = 0;
  std::size_t used = 0;
  try {
    port = std::stoi(port_env, &used);
  } catch (const std::exception&) {
    port = 0;
  }
  if (port < 1 || port > 65535 || port_env[used] != '\0')
    throw LaunchError("MASTER_PORT=" + std::string(port_env) + " is not a TCP port");
  return port;
}

// This process's environment less the variables each worker gets its own value of.
std::vector<std::string> inherited_environment() {
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
  return base;
}

// The signal handlers the launcher replaces while it waits.
struct SavedSignals {
  struct sigaction on_int {}, on_term {}, on_hup {};
  bool hup = false;  // SIGHUP handled (it was not ignored, as under nohup)
};

// While the launcher waits, SIGINT, SIGTERM and SIGHUP (unless ignored when it began, as under
// nohup) are counted, to pass on to the workers. Returns the handlers it replaced.
SavedSignals install_launcher_signals() {
  struct sigaction count {};
  count.sa_handler = launcher_on_signal;
  sigemptyset(&count.sa_mask);
  for (int sig : kStopSignals) sigaddset(&count.sa_mask, sig);
  for (auto& received : g_launcher_received) received = 0;
  SavedSignals saved;
  sigaction(SIGINT, &count, &saved.on_int);
  sigaction(SIGTERM, &count, &saved.on_term);
  sigaction(SIGHUP, nullptr, &saved.on_hup);
  saved.hup = saved.on_hup.sa_handler != SIG_IGN;
  if (saved.hup) sigaction(SIGHUP, &count, nullptr);
  return saved;
}

void restore_signals(const SavedSignals& saved) {
  sigaction(SIGINT, &saved.on_int, nullptr);
  sigaction(SIGTERM, &saved.on_term, nullptr);
  if (saved.hup) sigaction(SIGHUP, &saved.on_hup, nullptr);
}

// Starts worker `rank` of `n`: `args` with torchrun's variables on top of `base`, SIGINT and
// SIGTERM back to their defaults (the workers handle them as `train` does; SIGHUP is the
// default there unless ignored here, SIGXFSZ ignored if it is here). 0 or the error.
int spawn_worker(const std::vector<std::string>& args, const std::vector<std::string>& base, int rank, int n, int port,
                 pid_t& pid) {
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
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  const int rc = posix_spawn(&pid, args[0].c_str(), nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  return rc;
}

// The workers until the last has ended: the first failure's exit code is the launcher's. A
// worker that fails stops the others (SIGTERM, SIGKILL 15 s later), except with an agreed
// stop, after which the others end by themselves (SIGTERM only if they hang for 60 s). A
// SIGINT, SIGTERM or SIGHUP to the launcher is passed on; the same one again within 3 s kills
// the workers (SIGKILL), and the launcher's exit code is then 128 + it.
class WorkerWatch {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kForceWithin{3};

  WorkerWatch(std::vector<pid_t> pids, int first_failure, const std::function<void(const std::string&)>& say,
              const std::vector<int>& agreed_stops)
      : pids_(std::move(pids)), done_(pids_.size(), false), left_(pids_.size()), first_failure_(first_failure),
        say_(say), agreed_stops_(agreed_stops) {}

  int wait() {
    if (first_failure_ != 0) stop_others();
    while (left_ > 0) {
      take_signals();
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid > 0) {
        ended(pid, status);
        continue;
      }
      on_deadlines();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return forced_ != 0 ? 128 + forced_ : first_failure_;
  }

 private:
  void signal_others(int sig) {
    for (std::size_t i = 0; i < pids_.size(); ++i)
      if (!done_[i]) ::kill(pids_[i], sig);
  }

  // The stop signals that arrived since the last look: each passed on to the workers (who may
  // have had it from the terminal too: a repeat from the launcher never forces their stop), or,
  // the same signal again within kForceWithin, the workers killed.
  void take_signals() {
    for (int sig : kStopSignals) {
      const int slot = stop_slot(sig);
      const int received = g_launcher_received[slot];
      if (received == taken_[slot]) continue;
      const bool twice = received - taken_[slot] > 1;
      taken_[slot] = received;
      const Clock::time_point now = Clock::now();
      const bool again = twice || (received_at_[slot] && now - *received_at_[slot] < kForceWithin);
      received_at_[slot] = now;
      if (!again) {
        signal_others(sig);
        continue;
      }
      if (forced_ == 0 && say_)
        say_(std::string(stop_name(sig)) + " again within " + std::to_string(kForceWithin.count()) +
             " s: killing the workers");
      if (forced_ == 0) forced_ = sig;
      signal_others(SIGKILL);
      killing_ = terming_ = false;
    }
  }

  // SIGTERM now, SIGKILL what is left 15 s later.
  void stop_others() {
    signal_others(SIGTERM);
    killing_ = true;
    kill_at_ = Clock::now() + std::chrono::seconds(15);
  }

  // Worker `pid` ended: the first failure decides how the others are stopped.
  void ended(pid_t pid, int status) {
    for (std::size_t i = 0; i < pids_.size(); ++i) {
      if (pids_[i] != pid || done_[i]) continue;
      done_[i] = true;
      --left_;
      const int code = worker_exit_code(status);
      if (code == 0 || first_failure_ != 0 || forced_ != 0) continue;
      first_failure_ = code;
      if (left_ > 0 && std::find(agreed_stops_.begin(), agreed_stops_.end(), code) != agreed_stops_.end()) {
        // The others stop after the same step by themselves; SIGTERM only if they hang.
        terming_ = true;
        term_at_ = Clock::now() + std::chrono::seconds(60);
      } else if (left_ > 0) {
        if (say_) say_("worker " + std::to_string(i) + " ended with exit code " + std::to_string(code) + "; stopping the others");
        stop_others();
      }
    }
  }

  // SIGTERM after an agreed stop that the others did not follow in time; SIGKILL after a
  // SIGTERM they did not follow.
  void on_deadlines() {
    if (terming_ && Clock::now() > term_at_) {
      if (say_) say_("the other workers did not end within 60 s of an agreed stop; stopping them");
      terming_ = false;
      stop_others();
    }
    if (killing_ && Clock::now() > kill_at_) {
      signal_others(SIGKILL);
      killing_ = false;
    }
  }

  std::vector<pid_t> pids_;
  std::vector<bool> done_;
  std::size_t left_;
  int first_failure_;
  const std::function<void(const std::string&)>& say_;
  const std::vector<int>& agreed_stops_;
  bool killing_ = false;  // SIGKILL what is left at kill_at_
  Clock::time_point kill_at_ = Clock::now();
  bool terming_ = false;  // SIGTERM what is left at term_at_ (after an agreed stop)
  Clock::time_point term_at_ = kill_at_;
  int taken_[kStopSignalCount] = {};  // of g_launcher_received, the signals already acted on
  std::optional<Clock::time_point> received_at_[kStopSignalCount];  // each one's last arrival
  int forced_ = 0;  // the signal whose repeat killed the workers
};

}  // namespace

int run_local_workers(const std::vector<std::string>& args, int n, const std::function<void(const std::string&)>& say,
                      const std::vector<int>& agreed_stops) {
  if (args.empty() || n < 1) throw std::invalid_argument("run_local_workers: no command, or fewer than 1 worker");
  const int port = rendezvous_port();
  if (say)
    say(std::to_string(n) + " data-parallel workers on this machine (ranks 0-" + std::to_string(n - 1) +
        ", rendezvous at 127.0.0.1:" + std::to_string(port) + ")");
  const std::vector<std::string> base = inherited_environment();
  const SavedSignals saved = install_launcher_signals();
  std::vector<pid_t> pids;
  int first_failure = 0;
  for (int rank = 0; rank < n; ++rank) {
    pid_t pid = -1;
    if (const int rc = spawn_worker(args, base, rank, n, port, pid); rc != 0) {
      if (say) say("starting worker " + std::to_string(rank) + " (" + args[0] + "): " + std::strerror(rc));
      first_failure = 1;
      break;
    }
    pids.push_back(pid);
  }
  const int code = WorkerWatch(std::move(pids), first_failure, say, agreed_stops).wait();
  restore_signals(saved);
  return code;
}

}  // namespace accelkit::dist
