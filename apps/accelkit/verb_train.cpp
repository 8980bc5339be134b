// accelkit train [--config file.toml] [--resume] [--nproc-per-node N] [--json]: the example trainer (core's
// Trainer) with a progress bar on a terminal, plain log lines otherwise, JSON lines with
// --json.
//
// Exit codes: 0 done (or nothing left to do), 1 failure (a refused resume, a damaged
// checkpoint directory, a diverged loss, I/O), 2 bad config ([train] or settings), 3 device
// unavailable, 4 stopped by the thermal guard (guard_policy = stop) after saving a checkpoint,
// 128 + signal (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP; the first one received) when
// stopped by a signal after saving a checkpoint - so that `accelkit train && next` does not go
// on after an interrupt. The same signal again while the step finishes kills the process at
// once (checkpoint writes are atomic, so the directory stays valid); under a launcher, not
// when the launcher sent it (it passes on what the terminal sent the workers too).
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "accelkit/autotune.hpp"
#include "accelkit/checkpoint.hpp"
#include "accelkit/distributed.hpp"
#include "accelkit/sdk/device.hpp"
#include "accelkit/readings.hpp"
#include "accelkit/sdk/monitor.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/train.hpp"
#include "cli.hpp"
#include "format.hpp"
#include "render.hpp"
#include "render_autotune.hpp"
#include "render_batch.hpp"
#include "json_out.hpp"
#include "trace_out.hpp"

namespace accelkit::cli {

namespace {

std::atomic<bool> g_train_stop{false};
volatile std::sig_atomic_t g_train_signal = 0;  // the first stop signal: the exit code is 128 + it
volatile std::sig_atomic_t g_train_seen = 0;    // 1 << signal for each stop signal received
volatile std::sig_atomic_t g_train_launcher = 0;  // the launcher's pid under one, else 0
volatile std::sig_atomic_t g_train_quiet = 0;     // a rank other than 0: rank 0 says it

// The same stop signal again takes its default action at once (kills the process: checkpoint
// writes are atomic), unless the launcher sent it: it passes on what the workers may already
// have had from the terminal or a supervisor's signal to the process group, and forces a stop
// with SIGKILL itself. Runs with the other stop signals blocked.
void on_train_signal(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  const int bit = 1 << sig;
  const bool from_launcher =
      g_train_launcher != 0 && info && info->si_code == SI_USER && info->si_pid == g_train_launcher;
  if ((g_train_seen & bit) && !from_launcher) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    ::raise(sig);  // pending until this handler returns, then the default action
    errno = saved_errno;
    return;
  }
  const bool first = g_train_seen == 0;
  g_train_seen = g_train_seen | bit;
  if (g_train_signal == 0) g_train_signal = sig;
  g_train_stop.store(true);
  static const char msg[] = "\naccelkit: stopping after this step to save a checkpoint (the same signal again aborts)\n";
  if (first && !g_train_quiet && ::write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
  }
  errno = saved_errno;
}

// SIGINT, SIGTERM and SIGHUP set the stop flag for the guard's lifetime (SIGHUP not where it
// was ignored when the run began, as under nohup). `launcher`: the pid of the process that
// started this rank (0 when none did), whose signals never force.
class TrainSignals {
 public:
  TrainSignals(pid_t launcher, bool quiet) {
    g_train_stop = false;
    g_train_signal = 0;
    g_train_seen = 0;
    g_train_launcher = launcher;
    g_train_quiet = quiet ? 1 : 0;
    struct sigaction sa {};
    sa.sa_sigaction = on_train_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&sa.sa_mask, sig);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGHUP, nullptr, &old_hup_);
    hup_ = old_hup_.sa_handler != SIG_IGN;
    if (hup_) sigaction(SIGHUP, &sa, nullptr);
  }
  ~TrainSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    if (hup_) sigaction(SIGHUP, &old_hup_, nullptr);
  }
  TrainSignals(const TrainSignals&) = delete;
  TrainSignals& operator=(const TrainSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_hup_ {};
  bool hup_ = false;
};

std::string loss_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A data-parallel run's stop: which ranks asked for it (every rank stops after the same step).
std::string ranks_text(const std::vector<int>& ranks) {
  if (ranks.empty()) return "";
  std::string text = ranks.size() == 1 ? " (asked by rank " : " (asked by ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "; every rank stops after the same step)";
}

// 75 -> "1:15", 3725 -> "1:02:05"
std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

// The device temperature: the guard's latest sample while it runs (a monitor is sampled from
// one thread), else sampled here at most every 2 s (sensors can be slow to read).
class Thermometer {
 public:
  explicit Thermometer(const std::shared_ptr<Device>& device) {
    auto monitor = device->monitor();
    if (monitor.ok()) monitor_ = monitor.value();
  }
  void use(const Guard* guard) { guard_ = guard && guard->enabled() ? guard : nullptr; }
  std::optional<double> read() {
    if (guard_) return guard_->latest().temperature_c;
    const auto now = std::chrono::steady_clock::now();
    if (!monitor_ || (sampled_ && now - last_ < std::chrono::seconds(2))) return value_;
    sampled_ = true;
    last_ = now;
    value_.reset();
    auto sample = monitor_->sample();
    if (sample.ok()) screen_readings(sample.value());
    if (sample.ok())
      for (const auto& r : sample.value())
        if (r.key == reading::temperature_c && r.value) value_ = r.value;
    return value_;
  }

 private:
  std::shared_ptr<Monitor> monitor_;
  const Guard* guard_ = nullptr;
  bool sampled_ = false;
  std::chrono::steady_clock::time_point last_;
  std::optional<double> value_;
};

std::string temperature_text(const std::optional<double>& t) {
  return t ? fixed(*t, 0) + "\xC2\xB0" "C" : std::string("n/a");
}

int terminal_columns() {
  struct winsize w {};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

// Display width of UTF-8 text (one column per code point here).
std::size_t columns(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// A redrawn bar on a terminal (at most 10 times a second), a line per log step otherwise,
// and a JSON line per log step on stdout with --json.
class Progress {
 public:
  Progress(bool tty, bool json, Thermometer& thermometer) : tty_(tty), json_(json), thermometer_(thermometer) {}

  void update(const TrainProgress& p) {
    if (p.loss) loss_ = p.loss;
    const auto now = std::chrono::steady_clock::now();
    const bool last = p.step == p.steps;
    if (json_ && p.log) {
      auto t = thermometer_.read();
      Json j{{"event", "step"}, {"step", p.step}, {"steps", p.steps}, {"loss", p.loss ? Json(*p.loss) : Json(nullptr)},
             {"steps_per_s", p.steps_per_s}, {"eta_s", p.eta_s}, {"elapsed_s", p.elapsed_s},
             {"temperature_c", t ? Json(*t) : Json(nullptr)}};
      std::cout << j.dump() << std::endl;
    }
    if (tty_) {
      if (!last && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
      last_draw_ = now;
      drawn_ = true;
      // Never wider than the terminal, or the carriage return would not redraw one line.
      const auto width = static_cast<std::size_t>(terminal_columns() - 1);
      std::string text = line(p, true);
      if (columns(text) > width) text = line(p, false);
      if (columns(text) > width) text.resize(width);
      std::cerr << "\r\033[K" << text << std::flush;
    } else if (!json_ && p.log) {
      std::cerr << line(p, false) << '\n';
    }
  }

  // Ends the bar's line before anything else is printed.
  void finish() {
    if (tty_ && drawn_) std::cerr << '\n';
    drawn_ = false;
  }

 private:
  std::string line(const TrainProgress& p, bool bar) {
    const int width = 24;
    const double frac = p.steps > 0 ? static_cast<double>(p.step) / static_cast<double>(p.steps) : 1.0;
    const int filled = static_cast<int>(frac * width);
    std::string out = "step " + std::to_string(p.step) + "/" + std::to_string(p.steps);
    if (bar) out += " [" + std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(width - filled), '.') + "]";
    out += "  " + fixed(p.steps_per_s, p.steps_per_s >= 100 ? 0 : 1) + " step/s";
    out += "  loss " + (loss_ ? loss_text(*loss_) : std::string("-"));
    out += "  ETA " + clock_text(p.eta_s);
    out += "  temp " + temperature_text(thermometer_.read());
    return out;
  }

  bool tty_, json_;
  Thermometer& thermometer_;
  std::optional<double> loss_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_;
};

std::string checkpoint_plan(const TrainConfig& c) {
  if (c.checkpoint_dir.empty()) return "checkpoints off";
  std::string out = "checkpoints in " + c.checkpoint_dir;
  out += c.checkpoint_every > 0 ? " every " + std::to_string(c.checkpoint_every) + " steps" : " at the end";
  out += c.keep_last > 0 ? " (keep " + std::to_string(c.keep_last) + ")" : " (keep all)";
  return out;
}

// Whether the steps waited on their input: the number that says if the pipeline is the
// bottleneck.
std::string data_line(int prefetch, double wait_ms, double produce_ms, double step_ms) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << "data: " << produce_ms << " ms per step to produce the input ("
      << (prefetch > 0 ? std::to_string(prefetch) + " batches prefetched" : std::string("in the step: prefetch 0"))
      << "); the steps waited " << wait_ms << " ms each for it, "
      << std::setprecision(0) << (step_ms > 0 ? 100.0 * wait_ms / step_ms : 0.0) << "% of a step"
      << (step_ms > 0 && wait_ms > 0.1 * step_ms ? ": the input pipeline holds the training back" : "");
  return out.str();
}

// Ranks other than 0 of a data-parallel run say nothing while they train (rank 0 reports for
// the run); their errors are still printed, after this is gone.
class QuietRank {
 public:
  explicit QuietRank(bool quiet) : quiet_(quiet) {
    if (!quiet_) return;
    out_ = std::cout.rdbuf(nullptr);
    err_ = std::cerr.rdbuf(nullptr);
  }
  ~QuietRank() {
    if (!quiet_) return;
    std::cout.rdbuf(out_);
    std::cerr.rdbuf(err_);
    std::cout.clear();
    std::cerr.clear();
  }
  QuietRank(const QuietRank&) = delete;
  QuietRank& operator=(const QuietRank&) = delete;

 private:
  bool quiet_;
  std::streambuf* out_ = nullptr;
  std::streambuf* err_ = nullptr;
};

// [train] from the settings with --batch on top; with --batch auto, says that the finder runs.
TrainConfig requested_train_config(const Invocation& inv, const Runtime& rt) {
  TrainConfig config = train_config_from(rt.context().settings());
  if (inv.batch > 0) {
    config.batch_size = inv.batch;
    config.batch_size_set = true;
    if (config.batch_size % config.micro_batches != 0 && !inv.batch_auto)
      throw SettingsError("--batch " + std::to_string(inv.batch) + " is not divisible by train.micro_batches (" +
                          std::to_string(config.micro_batches) + ")");
  }
  config.batch_auto = inv.batch_auto;
  config.batch_max = inv.batch_max;
  if (config.batch_auto)
    std::cerr << "accelkit train: finding the largest batch that fits " << rt.device_handle()->info().id
              << (config.batch_max > 0 ? " (at most " + std::to_string(config.batch_max) + ")" : std::string()) << "...\n";
  return config;
}

// The run as it starts: a JSON line with --json, one line on stderr, then the decisions taken
// (auto-tuning, the batch finder's, the runtime's) on stderr without --json.
void announce_training(const Runtime& rt, const Trainer& trainer, const dist::ProcessGroup& group, bool json) {
  const TrainConfig& config = trainer.config();
  const DeviceInfo& device = rt.device_handle()->info();
  const std::string model = "MLP " + std::to_string(config.depth) + "x" + std::to_string(config.width) + " -> " +
                            std::to_string(config.outputs);
  if (json) {
    std::cout << Json{{"event", "start"}, {"device", device.id}, {"device_name", device.name},
                      {"precision", to_string(rt.precision().dtype)}, {"autocast", rt.precision().autocast},
                      {"steps", config.steps}, {"batch_size", config.batch_size},
                      {"micro_batches", config.micro_batches}, {"model", model},
                      {"checkpoint_dir", config.checkpoint_dir},
                      {"batch_finder", trainer.batch_decision() ? batch_decision_json(*trainer.batch_decision()) : Json(nullptr)},
                      {"autotune", last_tune_decision(rt) ? autotune_json(*last_tune_decision(rt)) : Json(nullptr)},
                      {"decisions", decisions_json(rt.context().decisions())}}
                     .dump()
              << std::endl;
  }
  std::cerr << "accelkit train: " << device.id << " (" << device.name << "), " << model << ", batch "
            << config.batch_size
            << (group.world_size() > 1 ? " over " + std::to_string(group.world_size()) + " ranks (" +
                                             group.launch().launcher + ", " + group.backend() + ")"
                                       : std::string())
            << (config.micro_batches > 1 ? " in " + std::to_string(config.micro_batches) + " micro-batches" : "")
            << ", " << config.steps << " steps, " << checkpoint_plan(config) << '\n';

  if (const auto& tuned = last_tune_decision(rt); tuned && !json) render_autotune(std::cerr, *tuned);
  if (const auto& sized = trainer.batch_decision(); sized && !json) render_batch_decision(std::cerr, *sized);
  if (!json) render_decisions(std::cerr, rt.context().decisions());
}

// Trains under the stop signals, the progress shown and the steps traced as they go.
TrainResult run_trainer(Trainer& trainer, bool resume, Guard& guard, Progress& progress,
                        std::optional<StepTrace>& trace, const dist::ProcessGroup& group) {
  TrainOptions train_options;
  train_options.guard = guard.enabled() ? &guard : nullptr;
  train_options.resume = resume;
  train_options.stop = &g_train_stop;
  train_options.on_start = [&trace, steps = trainer.config().steps](const TrainResult& r) {
    if (r.resumed_from) std::cerr << "resumed from " << *r.resumed_from << " (step " << r.start_step << ")\n";
    std::cerr << "using " << r.optimizer << ", " << r.precision << '\n';
    if (trace) trace->on_start(r.start_step, steps);
  };
  train_options.on_step = [&progress, &trace](const TrainProgress& p) {
    progress.update(p);
    if (trace) trace->after_step(p.step, p.steps);
  };
  TrainResult result;
  {
    // Under a launcher (--nproc-per-node, torchrun, srun, mpirun) the parent process is it.
    TrainSignals signals(group.launch().launcher != "none" ? ::getppid() : 0, !group.is_main());
    try {
      result = trainer.run(train_options);
    } catch (...) {
      progress.finish();
      throw;
    }
  }
  progress.finish();
  return result;
}

// The run's end as a JSON line (--json).
Json train_end_event(const TrainResult& result, int steps, const std::optional<std::string>& saved,
                     double data_wait_per_step, double data_produce_per_step) {
  return Json{{"event", "end"}, {"step", result.end_step}, {"steps", steps},
              {"start_step", result.start_step}, {"interrupted", result.interrupted},
              {"guard_stopped", result.guard_stopped},
              {"interrupted_ranks", result.interrupted_ranks},
              {"guard_stopped_ranks", result.guard_stopped_ranks},
              {"resumed_from", result.resumed_from ? Json(*result.resumed_from) : Json(nullptr)},
              {"initial_loss", result.losses.empty() ? Json(nullptr) : Json(result.losses.front())},
              {"final_loss", result.losses.empty() ? Json(nullptr) : Json(result.losses.back())},
              {"checkpoint", saved ? Json(*saved) : Json(nullptr)}, {"optimizer", result.optimizer},
              {"precision", result.precision},
              {"metrics", result.metrics_path.empty() ? Json(nullptr) : Json(result.metrics_path)},
              {"report", result.report_path.empty() ? Json(nullptr) : Json(result.report_path)},
              {"data", {{"prefetch", result.prefetch},
                        {"wait_ms_per_step", data_wait_per_step},
                        {"produce_ms_per_step", data_produce_per_step}}}};
}

// How the run ended, and its exit code: stopped by the guard (4), by a signal (128 + it), or
// done, with the report's place and the input pipeline's wait.
int report_train_end(const TrainResult& result, int steps, bool json) {
  const std::optional<std::string> saved = result.saved.empty() ? std::nullopt : std::optional(result.saved.back());
  const int signal = g_train_signal;
  const auto trained = static_cast<double>(std::max<std::int64_t>(1, result.end_step - result.start_step));
  const double data_wait_per_step = result.data_wait_ms / trained;
  const double data_produce_per_step = result.data_produce_ms / trained;
  if (json)
    std::cout << train_end_event(result, steps, saved, data_wait_per_step, data_produce_per_step).dump() << std::endl;
  if (result.guard_stopped) {
    std::cerr << "stopped by the thermal guard" << ranks_text(result.guard_stopped_ranks) << " at step "
              << result.end_step << " of " << steps << "; "
              << (saved ? "checkpoint saved to " + *saved + "; continue with --resume once the device has cooled"
                        : std::string("checkpoints are off, nothing saved"))
              << '\n';
    return kExitGuardStop;
  }
  if (result.interrupted) {
    std::cerr << "interrupted" << ranks_text(result.interrupted_ranks) << " at step " << result.end_step << " of "
              << steps << "; "
              << (saved ? "checkpoint saved to " + *saved + "; continue with --resume"
                        : std::string("checkpoints are off, nothing saved"))
              << '\n';
    return 128 + (signal > 0 ? signal : SIGINT);
  }
  if (!result.losses.empty())
    std::cerr << "done: step " << result.end_step << "/" << steps << ", loss " << loss_text(result.losses.back())
              << " (from " << loss_text(result.losses.front()) << ")"
              << (saved ? ", checkpoint " + *saved : std::string()) << '\n';
  if (!json && !result.report_path.empty())
    std::cerr << "report: " << result.report_path << " (open it in a browser; per-step figures in " << result.metrics_path
              << ")\n";
  if (!json && result.end_step > result.start_step)
    std::cerr << data_line(result.prefetch, data_wait_per_step, data_produce_per_step, result.train_ms / trained)
              << '\n';
  return kExitOk;
}

int train(const Invocation& inv) {
  const bool json = inv.json;
  std::optional<StepTrace> trace;  // --trace: refuses a path it cannot write before anything runs
  if (!inv.trace.empty()) trace.emplace(inv.trace);
  auto rt = Runtime::start(inv.context_options());
  // Under a launcher (torchrun, srun, mpirun, --nproc-per-node): one rank of a data-parallel run.
  std::shared_ptr<dist::ProcessGroup> group = dist::init(*rt);
  QuietRank quiet(!group->is_main());
  Trainer trainer(
      *rt, requested_train_config(inv, *rt),
      [json](const BatchTrial& t) {
        if (!json) std::cerr << "  " << batch_trial_line(t) << '\n';
      },
      group);
  Thermometer thermometer(rt->device_handle());
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  announce_training(*rt, trainer, *group, json);

  Progress progress(tty, json, thermometer);
  // The guard's events as they happen: a line on stderr (after the bar's line), a JSON line.
  std::unique_ptr<Guard> guard = accelkit::make_guard(*rt, [&progress, json](const GuardEvent& e) {
    progress.finish();
    std::cerr << "accelkit train: " << e.text << '\n';
    if (json)
      std::cout << Json{{"event", "guard"}, {"kind", e.kind}, {"step", e.step},
                        {"value", e.value ? Json(*e.value) : Json(nullptr)},
                        {"threshold", e.threshold ? Json(*e.threshold) : Json(nullptr)}, {"paused_s", e.paused_s},
                        {"text", e.text}}
                       .dump()
                << std::endl;
  });
  thermometer.use(guard.get());
  if (!json) std::cerr << guard->describe() << '\n';
  const TrainResult result = run_trainer(trainer, inv.resume, *guard, progress, trace, *group);
  if (trace) trace->report(std::cerr, json);
  return report_train_end(result, trainer.config().steps, json);
}

}  // namespace

int verb_train(const Invocation& inv) {
  if (inv.nproc_per_node > 1 && !std::getenv("RANK")) return launch_local_workers(inv);
  try {
    return train(inv);
  } catch (const dist::LaunchError& e) {
    std::cerr << "accelkit train: launcher: " << e.what() << '\n';
    return kExitUsage;
  } catch (const dist::RankLostError& e) {
    std::cerr << "accelkit train: " << e.what() << '\n';
    return kExitFailure;
  } catch (const dist::WorldMismatchError& e) {
    std::cerr << "accelkit train: " << e.what() << '\n';
    return kExitFailure;
  } catch (const SettingsError&) {
    return start_error_exit();
  } catch (const UsageError& e) {  // --trace FILE that cannot be written
    std::cerr << "accelkit: " << e.what() << '\n';
    return kExitUsage;
  } catch (const DeviceUnavailableError&) {
    return start_error_exit();
  } catch (const TrainError& e) {
    std::cerr << "accelkit train: " << e.what() << '\n';
    return kExitFailure;
  } catch (const BatchDoesNotFitError& e) {
    std::cerr << "accelkit train: --batch auto: " << e.what() << "; nothing was trained or written\n";
    return kExitFailure;
  } catch (const CheckpointError& e) {
    std::cerr << "accelkit train: checkpoint: " << e.what() << '\n';
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "accelkit train: error: " << e.what() << '\n';
    return kExitFailure;
  }
}

}  // namespace accelkit::cli
