// bench/startup: what accelkit adds to process start-up (discovery + handshake + probing every
// plugin, plus the CLI's own libraries). Runs `accelkit info` and a bare LibTorch program
// alternately, each as a fresh process (posix_spawn + waitpid, timed with steady_clock,
// output to /dev/null), after warm-up; prints median/min/max of each, the added time and the
// ratio.
//
//   startup_bench [--runs N] [--warmup N] [--budget-ms MS] [--json]
//                 [--cli PATH] [--bare PATH] [--bare-arg ARG]... [-- CLI-ARGS...]
//                 (default CLI-ARGS: info)
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "accelkit/context.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int runs = 30;
  int warmup = 3;
  double budget_ms = 20.0;
  bool json = false;
  std::string cli = ACCELKIT_CLI_PATH;
  std::string bare = BARE_TORCH_PATH;
  std::vector<std::string> bare_args;
  std::vector<std::string> cli_args{"info"};
};

struct Stats {
  double median = 0, min = 0, max = 0, mean = 0;
};

Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(n);
  return s;
}

struct Timing {
  double wall_ms = 0;
  double cpu_ms = 0;  // user + system CPU of the child (less sensitive to other load)
};

double ms_of(const timeval& tv) { return tv.tv_sec * 1e3 + tv.tv_usec / 1e3; }

// One run; throws when it fails to start or exits non-zero.
Timing time_run(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const auto t0 = Clock::now();
  const int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  int status = 0;
  rusage ru{};
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  const auto t1 = Clock::now();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(args[0] + " " + (args.size() > 1 ? args[1] : "") + " failed (status " +
                             std::to_string(status) + "); run it by hand to see why");
  return {std::chrono::duration<double, std::milli>(t1 - t0).count(), ms_of(ru.ru_utime) + ms_of(ru.ru_stime)};
}

// "cpu (loaded), cuda (unavailable)": the plugins `accelkit plugins --json` finds, i.e. what
// every timed `accelkit info` discovers and probes.
std::string plugins_seen(const std::string& cli) {
  std::string out;
  if (FILE* p = ::popen(("'" + cli + "' plugins --json 2>/dev/null").c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  std::string list;
  try {
    const auto j = nlohmann::json::parse(out);
    for (const auto& pl : j.at("plugins"))
      list += (list.empty() ? "" : ", ") + pl.at("name").get<std::string>() + " (" +
              pl.at("status").get<std::string>() + ")";
  } catch (const std::exception&) {
    return "unknown";
  }
  return list.empty() ? "none" : list;
}

// Child mode: LibTorch is already loaded (linked, like the CLI); time what accelkit adds -
// settings, discovery, handshake, probing every plugin, negotiation - once, cold.
int measure_context() {
  const auto t0 = Clock::now();
  auto ctx = accelkit::Context::create(accelkit::ContextOptions{});
  const auto t1 = Clock::now();
  std::printf("%.3f %zu\n", std::chrono::duration<double, std::milli>(t1 - t0).count(),
              ctx->discovery().plugins.size());
  return 0;
}

// Runs this program in child mode: the cold Context::create time in ms.
double time_context_in_child() {
  static const std::string self = [] {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  }();
  FILE* p = ::popen(("'" + self + "' --measure-context 2>/dev/null").c_str(), "r");
  if (!p) throw std::runtime_error("cannot start the in-process measurement");
  double ms = -1;
  std::size_t plugins = 0;
  const int n = std::fscanf(p, "%lf %zu", &ms, &plugins);
  if (::pclose(p) != 0 || n != 2) throw std::runtime_error("in-process measurement failed");
  return ms;
}

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "startup_bench: " << why
            << "\nusage: startup_bench [--runs N] [--warmup N] [--budget-ms MS] [--json] [--cli PATH] "
               "[--bare PATH] [--bare-arg ARG]... [-- CLI-ARGS...]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--runs") o.runs = std::stoi(next());
      else if (a == "--warmup") o.warmup = std::stoi(next());
      else if (a == "--budget-ms") o.budget_ms = std::stod(next());
      else if (a == "--json") o.json = true;
      else if (a == "--cli") o.cli = next();
      else if (a == "--bare") o.bare = next();
      else if (a == "--bare-arg") o.bare_args.push_back(next());
      else if (a == "--") {
        o.cli_args.assign(argv + i + 1, argv + argc);
        break;
      } else usage("unknown argument '" + a + "'");
    } catch (const std::logic_error&) {
      usage("bad number for " + a);
    }
  }
  if (o.runs < 1 || o.warmup < 0) usage("--runs must be >= 1 and --warmup >= 0");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--measure-context") == 0) return measure_context();
  const Options o = parse(argc, argv);
  std::vector<std::string> cli{o.cli};
  cli.insert(cli.end(), o.cli_args.begin(), o.cli_args.end());
  std::vector<std::string> bare{o.bare};
  bare.insert(bare.end(), o.bare_args.begin(), o.bare_args.end());
  std::string bare_cmd;
  for (const auto& a : bare) bare_cmd += (bare_cmd.empty() ? "" : " ") + a;

  const std::string plugins = plugins_seen(o.cli);
  std::vector<double> t_cli, t_bare, diffs, c_cli, c_bare, c_diffs, t_ctx;
  try {
    for (int i = 0; i < o.warmup; ++i) {
      time_run(cli);
      time_run(bare);
    }
    for (int i = 0; i < o.runs; ++i) {
      // Alternate which goes first so that drift (caches, frequency, load) hits both alike.
      Timing c, b;
      if (i % 2 == 0) {
        c = time_run(cli);
        b = time_run(bare);
      } else {
        b = time_run(bare);
        c = time_run(cli);
      }
      t_cli.push_back(c.wall_ms);
      t_bare.push_back(b.wall_ms);
      diffs.push_back(c.wall_ms - b.wall_ms);
      c_cli.push_back(c.cpu_ms);
      c_bare.push_back(b.cpu_ms);
      c_diffs.push_back(c.cpu_ms - b.cpu_ms);
      t_ctx.push_back(time_context_in_child());
    }
  } catch (const std::exception& e) {
    std::cerr << "startup_bench: " << e.what() << '\n';
    return 1;
  }

  const Stats sc = stats_of(t_cli), sb = stats_of(t_bare), sd = stats_of(diffs);
  const Stats cc = stats_of(c_cli), cb = stats_of(c_bare), cd = stats_of(c_diffs);
  const double added_cpu = cd.median;
  const Stats sx = stats_of(t_ctx);
  // Each pair ran back to back under the same conditions: the median of the paired
  // differences is the estimate; median - median and min - min are shown beside it.
  const double added = sd.median;
  const double median_diff = sc.median - sb.median;
  const double min_diff = sc.min - sb.min;
  const double ratio = sb.median > 0 ? sc.median / sb.median : 0;
  std::string cmd;
  for (const auto& a : cli) cmd += (cmd.empty() ? "" : " ") + a;
  const bool within = added < o.budget_ms;

  if (o.json) {
    auto st = [](const Stats& s) {
      return nlohmann::ordered_json{{"median_ms", s.median}, {"min_ms", s.min}, {"max_ms", s.max}, {"mean_ms", s.mean}};
    };
    nlohmann::ordered_json j{{"runs", o.runs},
                             {"warmup", o.warmup},
                             {"plugins", plugins},
                             {"accelkit", {{"command", cmd}, {"wall", st(sc)}, {"cpu", st(cc)}}},
                             {"bare_torch", {{"command", bare_cmd}, {"wall", st(sb)}, {"cpu", st(cb)}}},
                             {"added_ms", added},
                             {"median_minus_median_ms", median_diff},
                             {"min_minus_min_ms", min_diff},
                             {"ratio", ratio},
                             {"paired_difference_wall", st(sd)},
                             {"added_cpu_ms", added_cpu},
                             {"paired_difference_cpu", st(cd)},
                             {"context_create_in_process", st(sx)},
                             {"budget_ms", o.budget_ms},
                             {"within_budget", within}};
    std::cout << j.dump(2) << '\n';
    return 0;
  }
  std::printf("start-up, %d alternating runs each after %d warm-up; ms from spawn to exit\n", o.runs,
              o.warmup);
  std::printf("accelkit: %s\nbare:     %s\nplugins:  %s\n\n", cmd.c_str(), bare_cmd.c_str(), plugins.c_str());
  std::printf("  %-22s %-5s %9s %9s %9s %9s\n", "program", "", "median", "min", "max", "mean");
  auto row = [](const char* name, const char* what, const Stats& s) {
    std::printf("  %-22s %-5s %9.1f %9.1f %9.1f %9.1f\n", name, what, s.median, s.min, s.max, s.mean);
  };
  row("accelkit", "wall", sc);
  row("bare LibTorch", "wall", sb);
  row("paired difference", "wall", sd);
  row("accelkit", "cpu", cc);
  row("bare LibTorch", "cpu", cb);
  row("paired difference", "cpu", cd);
  row("Context::create cold", "wall", sx);
  std::printf("\n  added: %.1f ms wall (median of paired differences; median - median %.1f, min - min %.1f),\n"
              "         %.1f ms CPU; ratio of medians %.3f; budget %.0f ms: %s\n",
              added, median_diff, min_diff, added_cpu, ratio, o.budget_ms, within ? "within" : "OVER");
  return 0;
}
