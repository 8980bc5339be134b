// The accelkit CLI: what was asked on the command line, exit codes, and the verbs.
#pragma once

#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "accelkit/context.hpp"

namespace accelkit::cli {

enum Exit : int {
  kExitOk = 0,
  kExitFailure = 1,
  kExitUsage = 2,        // bad option, unknown verb, bad config
  kExitUnavailable = 3,  // an explicitly requested device cannot be had
  kExitGuardStop = 4,    // train: the thermal guard stopped the run (policy stop), after a checkpoint
};

// A bad command line (exit 2).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Invocation {
  std::string verb;  // info | plugins | report | monitor | help; "" when none was given
  std::vector<std::string> operands;  // positionals after the verb (help's topic)
  bool help = false;
  bool version = false;
  bool json = false;
  // Settings given on the command line (schema key, value as typed), in order; validated by
  // Settings::resolve like every other layer.
  std::vector<std::pair<std::string, std::string>> settings;
  std::optional<std::string> config;
  std::vector<std::string> plugin_paths;
  // Verb options.
  bool verbose = false;            // plugins -v
  bool rescan = false;             // plugins --rescan
  bool apply = false;              // report --apply
  double interval = 1.0;           // monitor --interval (seconds)
  std::optional<long long> count;  // monitor --count; unset = until Ctrl-C
  bool csv = false;                // monitor --csv
  bool all = false;                // monitor --all: every device the plugins list; verify --all: every usable one
  bool quick = false;              // verify --quick
  unsigned long long seed = 0;     // verify --seed N (0 = fresh inputs)
  bool resume = false;             // train --resume
  int nproc_per_node = 0;          // train --nproc-per-node N: N local data-parallel workers
  std::vector<std::string> argv;   // the command line as given (train --nproc-per-node reruns it)
  std::string model = "mlp";       // bench --model
  std::string report_model;        // report --model FILE ("" = none)
  bool measure = false;            // report --model FILE --measure
  int steps = 20;                  // bench --steps
  int warmup = 3;                  // bench --warmup
  int batch = 0;                   // bench, train --batch B (0 = the model's default)
  bool batch_auto = false;         // --batch auto[:MAX]: the batch-size finder's answer
  int batch_max = 0;               // its MAX (0 = the finder's default)
  int width = 0;                   // bench --width (0 = the model's default)
  bool vs_tuned = false;           // bench --vs-tuned
  bool vs_eager = false;           // bench --vs-eager
  std::vector<std::string> inputs; // bench, report --input (a model file's)
  std::string mode;                // bench --mode infer|train
  double wait_quiet = 0;           // bench --wait-quiet[=S]
  double data_ms = 0;              // bench --data-ms MS
  std::string quantize;            // bench --quantize int8
  std::string trace;               // bench, train --trace FILE: a profiler trace of a few steps

  SettingsInputs settings_inputs() const;
  ContextOptions context_options() const;
};

// Throws UsageError.
Invocation parse_command_line(int argc, const char* const* argv);
// Usage for the whole tool, or for one verb.
void print_help(std::ostream& out, const std::string& verb = {});
bool is_verb(const std::string& name);

// Prints why negotiation failed and returns the exit code: 3 for an explicit request, else 1.
int report_device_failure(const Context& ctx);
// Called in a catch block around Runtime::start: prints a SettingsError (exit 2) or a
// DeviceUnavailableError (exit 3) and returns the exit code; rethrows anything else.
int start_error_exit();

int verb_info(const Invocation& inv, const Context& ctx);
int verb_plugins(const Invocation& inv, const Context& ctx);
int verb_report(const Invocation& inv, Context& ctx);
int verb_monitor(const Invocation& inv, const Context& ctx);
// bench and train start their own Runtime (verb_bench.cpp, verb_train.cpp).
int verb_bench(const Invocation& inv);
int verb_train(const Invocation& inv);
int verb_verify(const Invocation& inv);
// train --nproc-per-node N outside any launcher: runs N workers of this command (train_launch.cpp).
int launch_local_workers(const Invocation& inv);
// The whole command line: parse, dispatch, exit code; exceptions reported (cli_main.cpp). What
// the accelkit executable runs, through the CLI module's accelkit_cli_main (cli_entry.cpp).
int command_line_main(int argc, char** argv);

}  // namespace accelkit::cli
