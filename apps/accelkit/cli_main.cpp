// accelkit: global options, verb dispatch, exit codes (the CLI module's entry: cli_entry.cpp).
#include <exception>
#include <iostream>
#include <memory>

#include <spdlog/spdlog.h>

#include "accelkit/bench.hpp"
#include "accelkit/context.hpp"
#include "accelkit/loader.hpp"
#include "accelkit/log.hpp"
#include "accelkit/settings.hpp"
#include "accelkit/version.hpp"
#include "cli.hpp"
#include "json_out.hpp"

namespace accelkit::cli {
namespace {

int print_version(const Invocation& inv) {
  if (inv.json) {
    print_json(Json{{"accelkit_version", ACCELKIT_VERSION_STRING},
                    {"torch_version", host_torch_version()},
                    {"abi", std::to_string(ACCELKIT_ABI_MAJOR) + "." + std::to_string(ACCELKIT_ABI_MINOR)},
                    {"cxx_abi", host_cxx_abi()}});
  } else {
    std::cout << "accelkit " << ACCELKIT_VERSION_STRING << " (LibTorch " << host_torch_version()
              << ", plugin ABI " << ACCELKIT_ABI_MAJOR << '.' << ACCELKIT_ABI_MINOR << ")\n";
  }
  return kExitOk;
}

int run(int argc, const char* const* argv) {
  Invocation inv;
  try {
    inv = parse_command_line(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "accelkit: " << e.what() << "\nTry 'accelkit --help'.\n";
    return kExitUsage;
  }
  if (inv.version) return print_version(inv);
  if (inv.help || inv.verb == "help") {
    std::string topic = inv.verb == "help" ? (inv.operands.empty() ? "" : inv.operands.front()) : inv.verb;
    if (topic == "settings") {  // the schema as docs/settings.md's Markdown table
      std::cout << settings_table_markdown();
      return kExitOk;
    }
    if (!topic.empty() && !is_verb(topic)) {
      std::cerr << "accelkit: no help for unknown verb '" << topic << "'\n";
      return kExitUsage;
    }
    print_help(std::cout, topic);
    return kExitOk;
  }
  if (inv.verb.empty()) {
    print_help(std::cerr);
    return kExitUsage;
  }

  // bench, train and verify start their own Runtime (one discovery, not two).
  if (inv.verb == "bench") return verb_bench(inv);
  if (inv.verb == "train") return verb_train(inv);
  if (inv.verb == "verify") return verb_verify(inv);

  // Settings first, so the effective log level holds while plugins load.
  std::unique_ptr<Context> ctx;
  try {
    ctx = Context::create(Settings::resolve(inv.settings_inputs()), inv.context_options().loader);
  } catch (const SettingsError& e) {
    std::cerr << "accelkit: " << e.what() << '\n';
    return kExitUsage;
  }

  if (inv.verb == "info") return verb_info(inv, *ctx);
  if (inv.verb == "plugins") return verb_plugins(inv, *ctx);
  if (inv.verb == "report") return verb_report(inv, *ctx);
  if (inv.verb == "monitor") return verb_monitor(inv, *ctx);
  std::cerr << "accelkit: unknown verb '" << inv.verb << "'\n";
  return kExitUsage;
}

}  // namespace

int run_bench(const ContextOptions& options, const BenchOptions& bench, bool json);  // verb_bench.cpp

int verb_bench(const Invocation& inv) {
  BenchOptions b;
  b.model = inv.model;
  b.steps = inv.steps;
  b.warmup = inv.warmup;
  b.batch = inv.batch;
  b.batch_auto = inv.batch_auto;
  b.batch_max = inv.batch_max;
  b.width = inv.width;
  b.vs_tuned = inv.vs_tuned;
  b.vs_eager = inv.vs_eager;
  b.inputs = inv.inputs;
  b.mode = inv.mode;
  b.wait_quiet_s = inv.wait_quiet;
  b.data_ms = inv.data_ms;
  b.quantize = inv.quantize;
  b.trace = inv.trace;
  return run_bench(inv.context_options(), b, inv.json);
}

int command_line_main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "accelkit: error: " << e.what() << '\n';
    return kExitFailure;
  } catch (...) {
    std::cerr << "accelkit: error: unknown exception\n";
    return kExitFailure;
  }
}

}  // namespace accelkit::cli
