// Command-line parsing (Boost.Program_options) and help text.
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <iostream>
#include <variant>

#include <boost/program_options.hpp>

#include "cli.hpp"

namespace po = boost::program_options;

namespace accelkit::cli {
namespace {

struct VerbDoc {
  const char* name;
  const char* synopsis;
  const char* summary;
};

constexpr VerbDoc kVerbs[] = {
    {"info", "info [--json]", "the selected device and why, plugins, devices, settings"},
    {"plugins", "plugins [-v] [--rescan] [--json]",
     "every plugin found and what became of it (-v: search path and trace; --rescan: examine them again)"},
    {"report", "report [--apply] [--model FILE.pt [--measure [--input SHAPE...]] | --model FILE.pt2] [--json]",
     "decision, settings with provenance, precision plan (--apply: apply and read back; --model: the model's "
     "dimension alignment, or whether a .pt2 package runs here)"},
    {"monitor", "monitor [--all] [--interval S] [--count N] [--csv | --json]",
     "sample the selected device's sensors (--all: every device's)"},
    {"bench", "bench [--model M|FILE --input SHAPE...] [--mode infer|train] [--steps N] [--vs-tuned] [--vs-eager] [--quantize int8|int8-static] [--data-ms MS] [--wait-quiet[=S]] [--trace FILE] [--json]",
     "time a training step or your model: accelkit vs plain LibTorch"},
    {"train", "train --config FILE [--resume] [--nproc-per-node N] [--trace FILE] [--json]",
     "train the example model ([train] table in FILE)"},
    {"verify", "verify [--quick] [--device DEV | --all] [--seed N] [--json]",
     "check that every capability the device's plugin claims works here, against LibTorch's own results"},
    {"help", "help [VERB | settings]", "this text, one verb's, or every setting as a table"},
};

po::options_description global_options() {
  po::options_description d("Global options");
  d.add_options()
      ("config", po::value<std::string>()->value_name("FILE"), "TOML settings file (default: $ACCELKIT_CONFIG)")
      ("plugin-path", po::value<std::vector<std::string>>()->composing()->value_name("DIR"),
       "search DIR for plugins instead of the default path (repeatable)")
      ("json", po::bool_switch(), "machine-readable output")
      ("help,h", po::bool_switch(), "show help")
      ("version", po::bool_switch(), "show the version");
  return d;
}

// The option of a setting without its "--" (the schema's option: no_gpu -> no-gpu); "" for
// the file-only keys of [routing] and [train].
std::string option_name(const SettingSpec& spec) { return spec.option.empty() ? "" : spec.option.substr(2); }

// One option per setting, from the settings schema (the same table the TOML file, the
// environment and `accelkit report` use). A boolean is a switch that sets it (--no-gpu,
// --autotune); one that is on by default also has --no-<key> (--no-sampler). Lists may be
// repeated.
po::options_description settings_options() {
  po::options_description d("Settings (also TOML keys and ACCELKIT_* variables; accelkit report shows them)");
  for (const auto& spec : settings_schema()) {
    std::string help = spec.help;
    if (!spec.allowed.empty()) {
      help += ": ";
      for (std::size_t i = 0; i < spec.allowed.size(); ++i) help += (i ? " | " : "") + spec.allowed[i];
    }
    if (!spec.env.empty()) help += " [" + spec.env + "]";
    const std::string name = option_name(spec);
    if (name.empty()) continue;
    switch (spec.type) {
      case SettingType::boolean:
        d.add_options()(name.c_str(), po::bool_switch(), help.c_str());
        if (std::get<bool>(spec.default_value) && !spec.option_turns_off)
          d.add_options()(("no-" + name).c_str(), po::bool_switch(), ("turn off: " + spec.key).c_str());
        break;
      case SettingType::string_list:
        d.add_options()(name.c_str(), po::value<std::vector<std::string>>()->composing()->value_name("LIST"),
                        help.c_str());
        break;
      case SettingType::integer:
        d.add_options()(name.c_str(), po::value<std::string>()->value_name("N"), help.c_str());
        break;
      case SettingType::number:
        d.add_options()(name.c_str(), po::value<std::string>()->value_name("X"), help.c_str());
        break;
      case SettingType::string:
        d.add_options()(name.c_str(), po::value<std::string>()->value_name("VALUE"), help.c_str());
        break;
    }
  }
  return d;
}

po::options_description verb_options() {
  po::options_description d("Verb options");
  d.add_options()
      ("verbose,v", po::bool_switch(), "plugins: show the search path and every path tried")
      ("rescan", po::bool_switch(), "plugins: examine every plugin file again in a separate process")
      ("apply", po::bool_switch(), "report: apply the precision plan and read it back from LibTorch")
      ("measure", po::bool_switch(),
       "report --model: time each misaligned Linear as it is and padded (and each convolution, with --input)")
      ("interval", po::value<double>()->value_name("S"), "monitor: seconds between samples (default 1)")
      ("count", po::value<long long>()->value_name("N"), "monitor: number of samples (default: until Ctrl-C)")
      ("csv", po::bool_switch(), "monitor: CSV output (header + one row per sample)")
      ("all", po::bool_switch(), "monitor: every device the plugins list, usable here or not; verify: every usable device")
      ("quick", po::bool_switch(), "verify: smaller problems, fewer steps (seconds, not minutes)")
      ("seed", po::value<unsigned long long>()->value_name("N"),
       "verify: seed of the random inputs (default: fresh each run; the summary prints the one used)")
      ("model", po::value<std::string>()->value_name("M"),
       "bench: mlp | transformer | cnn | optimizer (default mlp), or a model file (with --input): TorchScript, or "
       "a .pt2 AOTInductor package (inference only); "
       "report: a TorchScript file whose dimension alignment to check, or a .pt2 package to check against this device")
      ("input", po::value<std::vector<std::string>>()->composing()->value_name("SHAPE"),
       "bench, report --measure: an input of the model file, DIMxDIMx...[,dtype], one per argument of its forward")
      ("mode", po::value<std::string>()->value_name("MODE"),
       "bench: infer (a model file's default: forward without autograd) or train")
      ("steps", po::value<int>()->value_name("N"), "bench: timed steps per variant (default 20)")
      ("warmup", po::value<int>()->value_name("N"), "bench: untimed warm-up steps per variant (default 3)")
      ("batch", po::value<std::string>()->value_name("B|auto[:MAX]"),
       "bench, train: batch size (default: the model's; train: [train] batch_size), or auto: the largest that fits "
       "the device's memory (the batch-size finder; at most MAX)")
      ("width", po::value<int>()->value_name("D"), "bench: model width (default: the model's)")
      ("vs-tuned", po::bool_switch(), "bench: also time hand-tuned LibTorch")
      ("vs-eager", po::bool_switch(), "bench: also time accelkit's settings with the step run eagerly (a captured step's own gain)")
      ("wait-quiet", po::value<double>()->implicit_value(60)->value_name("S"),
       "bench: first wait (up to S seconds, default 60) until other processes leave the CPUs alone")
      ("data-ms", po::value<double>()->value_name("MS"),
       "bench: feed every step from a producer of MS ms of CPU work per batch; accelkit prefetches (setting prefetch)")
      ("quantize", po::value<std::string>()->value_name("int8|int8-static"),
       "bench: also time the model file in INT8 (Runtime::quantize): int8 = its Linear layers, dynamic; "
       "int8-static = its convolutions and Linear layers, calibrated on the bench's inputs")
      ("trace", po::value<std::string>()->value_name("FILE"),
       "bench, train: write a Chrome/Perfetto trace of a few steps (bench: 5 of accelkit's after the timed ones; "
       "train: steps 2-6) through LibTorch's profiler and print the top operations by self time and by memory")
      ("resume", po::bool_switch(), "train: continue from the newest valid checkpoint")
      ("nproc-per-node", po::value<int>()->value_name("N"),
       "train: run N data-parallel workers on this machine (torchrun's variables; rank 0 reports and checkpoints)");
  return d;
}

std::string verb_or_none(const std::string& verb) { return verb.empty() ? std::string("(no verb)") : verb; }

void only_for(const po::variables_map& vm, const char* option, const std::string& verb,
              const char* allowed) {
  if (vm.count(option) && !vm[option].defaulted() && verb != allowed)
    throw UsageError(std::string("--") + option + " is an option of '" + allowed + "', not of '" +
                     verb_or_none(verb) + "'");
}

// An option two verbs take.
void only_for_either(const po::variables_map& vm, const char* option, const std::string& verb, const char* first,
                     const char* second) {
  if (vm.count(option) && verb != first && verb != second)
    throw UsageError(std::string("--") + option + " is an option of '" + first + "' and '" + second + "', not of '" +
                     verb_or_none(verb) + "'");
}

bool flag(const po::variables_map& vm, const char* name) { return vm[name].as<bool>(); }

// A positive decimal that fits an int, or nullopt.
std::optional<int> positive_int(const std::string& text) {
  if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const long long v = std::stoll(text);
  if (v < 1 || v > INT32_MAX) return std::nullopt;
  return static_cast<int>(v);
}

// --batch B | auto | auto:MAX
void parse_batch(const std::string& text, Invocation& inv) {
  if (text == "auto" || text.rfind("auto:", 0) == 0) {
    inv.batch_auto = true;
    if (text.size() > 4) {
      const auto max = positive_int(text.substr(5));
      if (!max) throw UsageError("--batch auto:MAX needs a positive MAX, got '" + text + "'");
      inv.batch_max = *max;
    }
    return;
  }
  const auto b = positive_int(text);
  if (!b) throw UsageError("--batch needs a positive number of samples, auto or auto:MAX, got '" + text + "'");
  inv.batch = *b;
}

// The command line against every option there is, the verb and its operands positional.
po::variables_map parse_options(int argc, const char* const* argv) {
  po::options_description hidden;
  hidden.add_options()
      ("verb", po::value<std::string>())
      ("operands", po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(global_options()).add(settings_options()).add(verb_options()).add(hidden);
  po::positional_options_description pos;
  pos.add("verb", 1).add("operands", -1);

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return vm;
}

void read_global_options(const po::variables_map& vm, Invocation& inv) {
  if (vm.count("verb")) inv.verb = vm["verb"].as<std::string>();
  if (vm.count("operands")) inv.operands = vm["operands"].as<std::vector<std::string>>();
  inv.help = flag(vm, "help");
  inv.version = flag(vm, "version");
  inv.json = flag(vm, "json");
  if (vm.count("config")) inv.config = vm["config"].as<std::string>();
  if (vm.count("plugin-path")) inv.plugin_paths = vm["plugin-path"].as<std::vector<std::string>>();
}

// The settings given as options, as (schema key, value) in the schema's order; a boolean's
// switch gives "true" (or "false" for one that turns it off), its --no-<key> "false".
void read_setting_options(const po::variables_map& vm, Invocation& inv) {
  for (const auto& spec : settings_schema()) {
    const std::string name = option_name(spec);
    if (name.empty()) continue;
    if (spec.type == SettingType::boolean) {
      const bool off_switch = spec.option_turns_off;  // --no-cache: only turns it off
      if (flag(vm, name.c_str())) inv.settings.emplace_back(spec.key, off_switch ? "false" : "true");
      if (!off_switch && vm.count("no-" + name) && flag(vm, ("no-" + name).c_str()))
        inv.settings.emplace_back(spec.key, "false");
      continue;
    }
    if (!vm.count(name)) continue;
    if (spec.type == SettingType::string_list) {
      for (const auto& item : vm[name].as<std::vector<std::string>>()) inv.settings.emplace_back(spec.key, item);
    } else {
      inv.settings.emplace_back(spec.key, vm[name].as<std::string>());
    }
  }
}

void read_verb_options(const po::variables_map& vm, Invocation& inv) {
  inv.verbose = flag(vm, "verbose");
  inv.rescan = flag(vm, "rescan");
  inv.apply = flag(vm, "apply");
  inv.measure = flag(vm, "measure");
  inv.csv = flag(vm, "csv");
  inv.all = flag(vm, "all");
  inv.quick = flag(vm, "quick");
  if (vm.count("seed")) inv.seed = vm["seed"].as<unsigned long long>();
  if (vm.count("interval")) inv.interval = vm["interval"].as<double>();
  if (vm.count("count")) inv.count = vm["count"].as<long long>();
  inv.resume = flag(vm, "resume");
  if (vm.count("nproc-per-node")) inv.nproc_per_node = vm["nproc-per-node"].as<int>();
  inv.vs_tuned = flag(vm, "vs-tuned");
  inv.vs_eager = flag(vm, "vs-eager");
  if (vm.count("model")) inv.model = inv.report_model = vm["model"].as<std::string>();
  if (vm.count("input")) inv.inputs = vm["input"].as<std::vector<std::string>>();
  if (vm.count("mode")) inv.mode = vm["mode"].as<std::string>();
  if (vm.count("wait-quiet")) inv.wait_quiet = vm["wait-quiet"].as<double>();
  if (vm.count("quantize")) inv.quantize = vm["quantize"].as<std::string>();
  if (vm.count("trace")) inv.trace = vm["trace"].as<std::string>();
  if (vm.count("data-ms")) inv.data_ms = vm["data-ms"].as<double>();
  if (vm.count("steps")) inv.steps = vm["steps"].as<int>();
  if (vm.count("warmup")) inv.warmup = vm["warmup"].as<int>();
  if (vm.count("batch")) parse_batch(vm["batch"].as<std::string>(), inv);
  if (vm.count("width")) inv.width = vm["width"].as<int>();
}

// A known verb, and operands only for help (one topic).
void check_verb(const Invocation& inv) {
  if (!inv.verb.empty() && !is_verb(inv.verb)) throw UsageError("unknown verb '" + inv.verb + "'");
  if (inv.verb != "help" && !inv.operands.empty())
    throw UsageError("unexpected argument '" + inv.operands.front() + "'");
  if (inv.verb == "help" && inv.operands.size() > 1)
    throw UsageError("unexpected argument '" + inv.operands[1] + "'");
}

// The options of plugins and report (and --input, which bench shares).
void check_plugins_report_options(const po::variables_map& vm, const Invocation& inv) {
  only_for(vm, "verbose", inv.verb, "plugins");
  only_for(vm, "rescan", inv.verb, "plugins");
  only_for(vm, "apply", inv.verb, "report");
  only_for(vm, "measure", inv.verb, "report");
  only_for_either(vm, "input", inv.verb, "bench", "report");
  if (inv.measure && inv.report_model.empty()) throw UsageError("--measure needs --model FILE");
}

void check_monitor_verify_options(const po::variables_map& vm, const Invocation& inv) {
  only_for(vm, "interval", inv.verb, "monitor");
  only_for(vm, "count", inv.verb, "monitor");
  only_for(vm, "csv", inv.verb, "monitor");
  if (inv.verb != "verify") only_for(vm, "all", inv.verb, "monitor");
  only_for(vm, "quick", inv.verb, "verify");
  only_for(vm, "seed", inv.verb, "verify");
  if (vm.count("seed") && inv.seed == 0) throw UsageError("--seed must be a positive number");
  if (inv.verb == "verify" && inv.all)
    for (const auto& [key, value] : inv.settings)
      if (key == "device") throw UsageError("--device and --all cannot be combined");
}

// The options of the verbs that run a model: bench, train, and report's --model.
void check_bench_train_options(const po::variables_map& vm, const Invocation& inv) {
  only_for_either(vm, "batch", inv.verb, "bench", "train");
  if (vm.count("input") && inv.verb == "report" && !inv.measure)
    throw UsageError("--input with report times the model's convolutions: it needs --model FILE --measure");
  for (const char* o : {"mode", "steps", "warmup", "width", "vs-tuned", "vs-eager", "wait-quiet", "quantize", "data-ms"})
    only_for(vm, o, inv.verb, "bench");
  only_for_either(vm, "trace", inv.verb, "bench", "train");
  only_for_either(vm, "model", inv.verb, "bench", "report");
  only_for(vm, "resume", inv.verb, "train");
  only_for(vm, "nproc-per-node", inv.verb, "train");
  if (vm.count("nproc-per-node") && (inv.nproc_per_node < 1 || inv.nproc_per_node > 1024))
    throw UsageError("--nproc-per-node must be from 1 to 1024");
}

// Values no verb takes.
void check_option_values(const Invocation& inv) {
  if (inv.csv && inv.json) throw UsageError("--csv and --json cannot be combined");
  if (!(std::isfinite(inv.interval) && inv.interval > 0 && inv.interval <= 86400))
    throw UsageError("--interval must be a number of seconds in (0, 86400]");
  if (inv.count && *inv.count < 1) throw UsageError("--count must be at least 1");
  for (const auto& p : inv.plugin_paths)
    if (p.empty() || p.front() != '/')
      throw UsageError("--plugin-path needs an absolute directory, got '" + p + "'");
}

}  // namespace

bool is_verb(const std::string& name) {
  for (const auto& v : kVerbs)
    if (name == v.name) return true;
  return false;
}

Invocation parse_command_line(int argc, const char* const* argv) {
  const po::variables_map vm = parse_options(argc, argv);
  Invocation inv;
  inv.argv.assign(argv, argv + argc);
  read_global_options(vm, inv);
  read_setting_options(vm, inv);
  read_verb_options(vm, inv);

  if (inv.help || inv.version) return inv;
  check_verb(inv);
  check_plugins_report_options(vm, inv);
  check_monitor_verify_options(vm, inv);
  check_bench_train_options(vm, inv);
  check_option_values(inv);
  return inv;
}

SettingsInputs Invocation::settings_inputs() const {
  SettingsInputs in;
  in.config_path = config;
  in.cli = settings;
  return in;
}

ContextOptions Invocation::context_options() const {
  ContextOptions o;
  o.settings = settings_inputs();
  o.loader.cli_paths = plugin_paths;
  o.loader.rescan = rescan;
  return o;
}

void print_help(std::ostream& out, const std::string& verb) {
  for (const auto& v : kVerbs) {
    if (verb.empty() || verb != v.name) continue;
    out << "Usage: accelkit [global options] " << v.synopsis << "\n\n  " << v.summary << "\n\n";
    if (verb == "monitor")
      out << "  Readings a device lacks print as n/a; --json gives the reason (one object per line).\n"
             "  Ctrl-C stops cleanly.\n\n";
    if (verb == "report")
      out << "  The precision plan follows the settings precision, tf32, threads and blas_kernels.\n\n";
    out << verb_options() << '\n' << global_options() << '\n' << settings_options();
    return;
  }
  out << "Usage: accelkit [global options] <verb> [verb options]\n\n"
         "accelkit finds the accelerator plugins installed here, picks the best device and\n"
         "says why.\n\nVerbs:\n";
  for (const auto& v : kVerbs) {
    std::string s = v.synopsis;
    out << "  " << s << std::string(s.size() < 52 ? 52 - s.size() : 1, ' ') << v.summary << '\n';
  }
  out << '\n' << global_options() << '\n' << settings_options() << '\n' << verb_options()
      << "\nEnvironment: each setting's ACCELKIT_* variable (above), ACCELKIT_CONFIG,\n"
         "ACCELKIT_PLUGIN_PATH, ACCELKIT_ADD_PLUGIN_PATH, ACCELKIT_PLUGINS_DISABLE, ACCELKIT_CACHE_DIR.\n"
         "Precedence: defaults < profile < config file < environment < command line.\n\n"
         "Exit status: 0 ok, 1 failure, 2 usage or configuration error, 3 requested device\n"
         "unavailable.\n";
}

}  // namespace accelkit::cli
