// Settings: schema, layering (default < profile < file < env < cli), validation and typing.
#include "accelkit/settings.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <system_error>

#include <toml++/toml.h>

#include "accelkit/train_config.hpp"
#include "config_file.hpp"
#include "accelkit/base/strings.hpp"
#include "toml_text.hpp"

namespace accelkit {

// ---- names ---------------------------------------------------------------------------------

const char* to_string(Origin o) noexcept {
  switch (o) {
    case Origin::default_value: return "default";
    case Origin::profile: return "profile";
    case Origin::file: return "file";
    case Origin::env: return "env";
    case Origin::cli: return "cli";
  }
  return "unknown";
}

const char* to_string(SettingType t) noexcept {
  switch (t) {
    case SettingType::boolean: return "boolean";
    case SettingType::integer: return "integer";
    case SettingType::number: return "number";
    case SettingType::string: return "string";
    case SettingType::string_list: return "array of strings";
  }
  return "unknown";
}

namespace {

template <typename E>
using Names = std::vector<std::pair<E, const char*>>;

// Each enumerated setting's spellings, in the order messages and help list them.
template <typename E> const Names<E>& names_of();
template <> const Names<Toggle>& names_of<Toggle>() {
  static const Names<Toggle> n = {{Toggle::automatic, "auto"}, {Toggle::on, "on"}, {Toggle::off, "off"}};
  return n;
}
template <> const Names<BlasKernels>& names_of<BlasKernels>() {
  static const Names<BlasKernels> n = {{BlasKernels::automatic, "auto"}, {BlasKernels::library, "library"}};
  return n;
}
template <> const Names<CompileMode>& names_of<CompileMode>() {
  static const Names<CompileMode> n = {
      {CompileMode::off, "off"}, {CompileMode::graph, "graph"}, {CompileMode::automatic, "auto"}};
  return n;
}
template <> const Names<SdpaBackend>& names_of<SdpaBackend>() {
  static const Names<SdpaBackend> n = {{SdpaBackend::automatic, "auto"},
                                       {SdpaBackend::flash, "flash"},
                                       {SdpaBackend::mem_efficient, "mem_efficient"},
                                       {SdpaBackend::math, "math"}};
  return n;
}
template <> const Names<Profile>& names_of<Profile>() {
  static const Names<Profile> n = {{Profile::balanced, "balanced"},
                                   {Profile::ultra_low_overhead, "ultra_low_overhead"},
                                   {Profile::maximum_performance, "maximum_performance"},
                                   {Profile::automatic, "auto"}};
  return n;
}
template <> const Names<LogLevel>& names_of<LogLevel>() {
  static const Names<LogLevel> n = {{LogLevel::trace, "trace"}, {LogLevel::debug, "debug"}, {LogLevel::info, "info"},
                                    {LogLevel::warn, "warn"},   {LogLevel::error, "error"}, {LogLevel::off, "off"}};
  return n;
}
template <> const Names<RouteTarget>& names_of<RouteTarget>() {
  static const Names<RouteTarget> n = {
      {RouteTarget::automatic, "auto"}, {RouteTarget::cpu, "cpu"}, {RouteTarget::device, "device"}};
  return n;
}

template <> const Names<GuardPolicy>& names_of<GuardPolicy>() {
  static const Names<GuardPolicy> n = {{GuardPolicy::warn, "warn"}, {GuardPolicy::pause, "pause"}, {GuardPolicy::stop, "stop"}};
  return n;
}

template <typename E>
const char* name_of(E e) noexcept {
  for (const auto& [v, name] : names_of<E>())
    if (v == e) return name;
  return "?";
}

template <typename E>
std::vector<std::string> allowed_of() {
  std::vector<std::string> out;
  for (const auto& entry : names_of<E>()) out.emplace_back(entry.second);
  return out;
}

template <typename E>
E enum_from(const std::string& s) {
  for (const auto& [v, name] : names_of<E>())
    if (s == name) return v;
  throw std::logic_error("'" + s + "' passed the schema's check but names no value");  // unreachable
}

}  // namespace

const char* to_string(CompileMode m) noexcept { return name_of(m); }
const char* to_string(SdpaBackend b) noexcept { return name_of(b); }
const char* to_string(Profile p) noexcept { return name_of(p); }
const char* to_string(LogLevel l) noexcept { return name_of(l); }
const char* to_string(RouteTarget t) noexcept { return name_of(t); }
const char* to_string(GuardPolicy p) noexcept { return name_of(p); }

std::string format_value(const SettingValue& v) {
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) {
    std::ostringstream s;
    s << *d;
    return s.str();
  }
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  return "[" + text::join(std::get<std::vector<std::string>>(v)) + "]";
}

namespace {

bool all_chars(std::string_view s, const char* extra) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [extra](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || std::strchr(extra, c) != nullptr;
  });
}

bool is_plugin_name(std::string_view s) { return s.size() <= 64 && all_chars(s, "_-"); }
bool is_capability_name(std::string_view s) { return s.size() <= 64 && all_chars(s, "_-."); }

}  // namespace

std::optional<DeviceSelector> DeviceSelector::parse(std::string_view text) {
  if (text == "auto") return DeviceSelector{};
  const auto colon = text.find(':');
  DeviceSelector d;
  if (!is_plugin_name(text.substr(0, colon)) || text.substr(0, colon) == "auto") return std::nullopt;
  d.plugin = std::string(text.substr(0, colon));
  if (colon == std::string_view::npos) return d;
  const auto digits = text.substr(colon + 1);
  std::size_t index = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || index > 4096) return std::nullopt;
  d.index = index;
  return d;
}

std::string DeviceSelector::str() const {
  if (automatic()) return "auto";
  return index ? plugin + ":" + std::to_string(*index) : plugin;
}

// ---- the schema ----------------------------------------------------------------------------

namespace {

using Store = std::function<void(Config&, const Effective&)>;

template <typename T>
void copy_origin(Setting<T>& s, const Effective& e) {
  s.origin = e.origin;
  s.source = e.source;
  s.why = e.why;
}

// Stores a value whose variant alternative converts to the field as it is.
template <typename Field, typename Get>
Store store_as(Get get) {
  return [get](Config& c, const Effective& e) {
    auto& s = get(c);
    copy_origin(s, e);
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_convertible_v<V, Field>) s.value = static_cast<Field>(v);
        },
        e.value);
  };
}

template <typename E, typename Get>
Store store_enum(Get get) {
  return [get](Config& c, const Effective& e) {
    auto& s = get(c);
    copy_origin(s, e);
    s.value = enum_from<E>(std::get<std::string>(e.value));
  };
}

#define ACCELKIT_FIELD(path) [](Config& c) -> auto& { return c.path; }

std::string option_for(const std::string& key) {
  std::string opt = "--" + key;
  std::replace(opt.begin(), opt.end(), '_', '-');
  return opt;
}

SettingSpec spec_of(std::string key, SettingType type, SettingValue def, std::string env, std::string help,
                    Store store) {
  SettingSpec s;
  s.option = option_for(key);
  s.key = std::move(key);
  s.type = type;
  s.default_value = std::move(def);
  s.env = std::move(env);
  s.help = std::move(help);
  s.store = std::move(store);
  return s;
}

SettingSpec flag_spec(std::string key, bool def, std::string env, std::string help, Store store) {
  return spec_of(std::move(key), SettingType::boolean, def, std::move(env), std::move(help), std::move(store));
}

SettingSpec int_spec(std::string key, std::int64_t def, std::int64_t min, std::int64_t max, std::string env,
                     std::string help, Store store) {
  SettingSpec s = spec_of(std::move(key), SettingType::integer, def, std::move(env), std::move(help), std::move(store));
  s.min = min;
  s.max = max;
  return s;
}

template <typename E>
SettingSpec enum_spec(std::string key, E def, std::string env, std::string help, Store store) {
  SettingSpec s = spec_of(std::move(key), SettingType::string, std::string(name_of(def)), std::move(env),
                          std::move(help), std::move(store));
  s.allowed = allowed_of<E>();
  return s;
}

SettingSpec text_spec(std::string key, std::string def, std::vector<std::string> allowed, std::string env,
                      std::string help, Store store) {
  SettingSpec s = spec_of(std::move(key), SettingType::string, std::move(def), std::move(env), std::move(help),
                          std::move(store));
  s.allowed = std::move(allowed);
  return s;
}

SettingSpec list_spec(std::string key, std::string env, std::string help, std::string (*check)(const SettingValue&),
                      Store store) {
  SettingSpec s = spec_of(std::move(key), SettingType::string_list, std::vector<std::string>{}, std::move(env),
                          std::move(help), std::move(store));
  s.check = check;
  return s;
}

// A temperature threshold a device can meet: at or below room temperature the guard would act
// on every sample, above 150 C on none (silicon shuts down well before).
std::string check_guard_temperature(const SettingValue& v) {
  const double t = std::get<double>(v);
  if (t == 0) return {};
  if (t < 30)
    return "must be 0 (the device's own threshold) or between 30 and 150 C, got " + format_value(v) +
           " C: at or below room temperature the guard would act on every sample";
  if (t > 150)
    return "must be 0 (the device's own threshold) or between 30 and 150 C, got " + format_value(v) +
           " C: no device runs that hot, the guard would never act";
  return {};
}

std::string check_batch_step_limit(const SettingValue& v) {
  const double s = std::get<double>(v);
  if (s != 0 && (s < 0.01 || s > 3600)) return "must be 0 (no limit) or between 0.01 and 3600 seconds, got " + format_value(v);
  return {};
}

std::string check_guard_interval(const SettingValue& v) {
  const double s = std::get<double>(v);
  if (s != 0 && (s < 0.01 || s > 3600)) return "must be 0 (off) or between 0.01 and 3600 seconds, got " + format_value(v);
  return {};
}

std::string check_guard_hysteresis(const SettingValue& v) {
  if (std::get<double>(v) > 50) return "must be at most 50 C, got " + format_value(v);
  return {};
}

std::string check_device(const SettingValue& v) {
  const auto& s = std::get<std::string>(v);
  if (DeviceSelector::parse(s)) return {};
  return "must be auto, <plugin> or <plugin>:<index> (lowercase letters, digits, '_', '-'; index 0-4096), got '" +
         text::shorten(s) + "'";
}

std::string check_plugins(const SettingValue& v) {
  for (const auto& item : std::get<std::vector<std::string>>(v))
    if (!is_plugin_name(item))
      return "must list plugin names (lowercase letters, digits, '_', '-'), got '" + text::shorten(item) + "'";
  return {};
}

std::string check_capabilities(const SettingValue& v) {
  for (const auto& item : std::get<std::vector<std::string>>(v))
    if (!is_capability_name(item))
      return "must list capability names (lowercase letters, digits, '_', '-', '.'), got '" + text::shorten(item) + "'";
  return {};
}

std::string check_implementation(const SettingValue& v) {
  const auto& s = std::get<std::string>(v);
  if (s == "auto" || (s.size() <= 128 && all_chars(s, "_-."))) return {};
  return "must be auto or an implementation's name (lowercase letters, digits, '_', '-', '.'), got '" +
         text::shorten(s) + "'";
}

// The file-only sections: their keys are not environment variables or options.
SettingSpec section_key(SettingSpec s) {
  s.env.clear();
  s.option.clear();
  return s;
}

void add_routing(std::vector<SettingSpec>& schema) {
  for (std::size_t i = 0; i < kOpClassCount; ++i) {
    const std::string op(kOpClassNames[i].second);
    schema.push_back(section_key(enum_spec<RouteTarget>(
        "routing." + op, RouteTarget::automatic, "", "where " + op + " operations run: auto (the plugin's rule), cpu, device",
        store_enum<RouteTarget>([i](Config& c) -> auto& { return c.routing[i]; }))));
  }
}

void add_train(std::vector<SettingSpec>& schema) {
  auto integer = [&](const char* key, std::int64_t def, std::int64_t min, const char* help, Store store) {
    schema.push_back(section_key(int_spec(std::string("train.") + key, def, min, INT64_MAX, "", help, std::move(store))));
  };
  auto number = [&](const char* key, double def, bool exclusive, const char* help, Store store) {
    SettingSpec s = spec_of(std::string("train.") + key, SettingType::number, def, "", help, std::move(store));
    s.min_exclusive = exclusive;
    schema.push_back(section_key(std::move(s)));
  };
  const TrainConfig d;
  integer("steps", d.steps, 1, "optimizer steps in all (a resumed run continues up to it)",
          store_as<std::int64_t>(ACCELKIT_FIELD(train.steps)));
  integer("batch_size", d.batch_size, 1, "samples per step (unset: the batch_size setting if > 0)",
          store_as<std::int64_t>(ACCELKIT_FIELD(train.batch_size)));
  integer("micro_batches", d.micro_batches, 1, "gradient accumulation: batch_size is split into this many",
          store_as<std::int64_t>(ACCELKIT_FIELD(train.micro_batches)));
  integer("width", d.width, 1, "input and hidden width of teacher and student",
          store_as<std::int64_t>(ACCELKIT_FIELD(train.width)));
  integer("depth", d.depth, 1, "hidden layers (Linear + tanh)", store_as<std::int64_t>(ACCELKIT_FIELD(train.depth)));
  integer("outputs", d.outputs, 1, "output width", store_as<std::int64_t>(ACCELKIT_FIELD(train.outputs)));
  number("lr", d.lr, true, "AdamW learning rate", store_as<double>(ACCELKIT_FIELD(train.lr)));
  number("weight_decay", d.weight_decay, false, "AdamW weight decay", store_as<double>(ACCELKIT_FIELD(train.weight_decay)));
  integer("seed", d.seed, 0, "teacher, student init and the data stream", store_as<std::int64_t>(ACCELKIT_FIELD(train.seed)));
  integer("log_every", d.log_every, 1, "a log line (or JSON record) every N steps",
          store_as<std::int64_t>(ACCELKIT_FIELD(train.log_every)));
  schema.push_back(section_key(text_spec("train.checkpoint_dir", d.checkpoint_dir, {}, "",
                                         "relative to the config file's directory; \"\" = none",
                                         store_as<std::string>(ACCELKIT_FIELD(train.checkpoint_dir)))));
  integer("checkpoint_every", d.checkpoint_every, 0, "0 = only at the end and on interruption",
          store_as<std::int64_t>(ACCELKIT_FIELD(train.checkpoint_every)));
  integer("keep_last", d.keep_last, 0, "checkpoints kept; 0 = all", store_as<std::int64_t>(ACCELKIT_FIELD(train.keep_last)));
}

// A number setting with its own range check (`check`; none when null).
void add_number(std::vector<SettingSpec>& s, const char* key, double def, const char* env, const char* help,
                std::string (*check)(const SettingValue&), Store store) {
  s.push_back(spec_of(key, SettingType::number, def, env, help, std::move(store)));
  s.back().check = check;
}

// Which device runs the program.
void add_device_choice(std::vector<SettingSpec>& s) {
  s.push_back(text_spec("device", "auto", {}, "ACCELKIT_DEVICE", "device to run on: auto, <plugin> or <plugin>:<index>",
                        [](Config& c, const Effective& e) {
                          copy_origin(c.device, e);
                          c.device.value = *DeviceSelector::parse(std::get<std::string>(e.value));
                        }));
  s.back().check = check_device;
  s.push_back(flag_spec("no_gpu", false, "ACCELKIT_NO_GPU", "never use a GPU", store_as<bool>(ACCELKIT_FIELD(no_gpu))));
}

// How the device computes: precision, graph capture, kernels and threads.
void add_compute(std::vector<SettingSpec>& s) {
  s.push_back(text_spec("precision", "auto", {"auto", "fp32", "bf16", "fp16"}, "ACCELKIT_PRECISION",
                        "compute precision (autocast)", [](Config& c, const Effective& e) {
                          copy_origin(c.precision, e);
                          c.precision.value = dtype_from_string(std::get<std::string>(e.value));
                        }));
  s.push_back(enum_spec<Toggle>("tf32", Toggle::automatic, "ACCELKIT_TF32", "TF32 for fp32 matmul and convolutions",
                                store_enum<Toggle>(ACCELKIT_FIELD(tf32))));
  s.push_back(enum_spec<CompileMode>("compile", CompileMode::automatic, "ACCELKIT_COMPILE", "graph capture of the step",
                                     store_enum<CompileMode>(ACCELKIT_FIELD(compile))));
  s.push_back(enum_spec<SdpaBackend>("sdpa_backend", SdpaBackend::automatic, "ACCELKIT_SDPA_BACKEND",
                                     "scaled dot-product attention backend",
                                     store_enum<SdpaBackend>(ACCELKIT_FIELD(sdpa_backend))));
  s.push_back(enum_spec<Toggle>("fused_optimizer", Toggle::automatic, "ACCELKIT_FUSED_OPTIMIZER",
                                "fused optimizer kernels", store_enum<Toggle>(ACCELKIT_FIELD(fused_optimizer))));
  s.push_back(text_spec("adamw_implementation", "auto", {}, "ACCELKIT_ADAMW_IMPLEMENTATION",
                        "AdamW implementation: auto (the fastest the plugin offers, measured) or one by name "
                        "(accelkit report lists them: fused-avx2, aten-fused, ...)",
                        store_as<std::string>(ACCELKIT_FIELD(adamw_implementation))));
  s.back().check = check_implementation;
  s.push_back(enum_spec<Toggle>("master_weights", Toggle::automatic, "ACCELKIT_MASTER_WEIGHTS",
                                "bf16 model weights with the fp32 master copy in the fused optimizer: auto = in "
                                "accelkit's own loops (bench, train), which run every forward under autocast",
                                store_enum<Toggle>(ACCELKIT_FIELD(master_weights))));
  s.push_back(int_spec("threads", 0, 0, 65536, "ACCELKIT_THREADS", "CPU threads (0 = auto)",
                       store_as<int>(ACCELKIT_FIELD(threads))));
  s.push_back(enum_spec<BlasKernels>("blas_kernels", BlasKernels::automatic, "ACCELKIT_BLAS_KERNELS",
                                     "CPU BLAS kernels: auto (replace a set narrower than the CPU runs) or library (its own)",
                                     store_enum<BlasKernels>(ACCELKIT_FIELD(blas_kernels))));
  s.push_back(enum_spec<Toggle>("kernels", Toggle::automatic, "ACCELKIT_KERNELS",
                                "the plugin's own operator kernels in place of LibTorch's for the inputs they take "
                                "(CPU: 2x2 max_pool2d, convolutions with one pixel on a side and, timed per shape, "
                                "others as a GEMM, a one-channel convolution's weight gradient without AVX-512, "
                                "training-mode batch_norm, dropout's masks): auto (where it has them; step tuning "
                                "measures them against LibTorch's), on, or off",
                                store_enum<Toggle>(ACCELKIT_FIELD(kernels))));
  s.push_back(enum_spec<Toggle>("malloc_reuse", Toggle::automatic, "ACCELKIT_MALLOC_REUSE",
                                "glibc's malloc keeps freed memory for the next step (blocks up to 256 MiB from its "
                                "heap, up to 1 GiB free kept) instead of returning it to the system between steps; "
                                "process-wide: auto (on a CPU device, where malloc is glibc's and the environment "
                                "does not tune it), on, or off",
                                store_enum<Toggle>(ACCELKIT_FIELD(malloc_reuse))));
}

// The batch size, the input pipeline and the memory the batch finder leaves free.
void add_batching(std::vector<SettingSpec>& s) {
  s.push_back(int_spec("batch_size", 0, 0, INT32_MAX, "ACCELKIT_BATCH_SIZE", "batch size (0 = auto)",
                       store_as<std::int64_t>(ACCELKIT_FIELD(batch_size))));
  s.push_back(int_spec("prefetch", 2, 0, 64, "ACCELKIT_PREFETCH",
                       "batches the input pipeline keeps ready on a background thread (0 = produced in the step)",
                       store_as<int>(ACCELKIT_FIELD(prefetch))));
  s.push_back(int_spec("memory_margin", 10, 0, 90, "ACCELKIT_MEMORY_MARGIN",
                       "percent of the device's memory the batch-size finder leaves free",
                       store_as<int>(ACCELKIT_FIELD(memory_margin))));
  add_number(s, "batch_step_limit", 2.0, "ACCELKIT_BATCH_STEP_LIMIT",
             "seconds a training step may take at the batch the batch finder picks on a CPU (0 = no limit): the "
             "memory there fits batches whose steps run for minutes",
             check_batch_step_limit, store_as<double>(ACCELKIT_FIELD(batch_step_limit)));
}

// The telemetry sampler and the thermal guard that reads it.
void add_guard(std::vector<SettingSpec>& s) {
  s.push_back(flag_spec("sampler", true, "ACCELKIT_SAMPLER", "background telemetry sampler thread",
                        store_as<bool>(ACCELKIT_FIELD(sampler))));
  add_number(s, "guard_interval", 5.0, "ACCELKIT_GUARD_INTERVAL",
             "seconds between the thermal guard's samples during training (0 = off; also off without the sampler)",
             check_guard_interval, store_as<double>(ACCELKIT_FIELD(guard_interval)));
  s.push_back(enum_spec<GuardPolicy>("guard_policy", GuardPolicy::warn, "ACCELKIT_GUARD_POLICY",
                                     "at the guard's temperature: warn, pause (until guard_hysteresis cooler) or stop "
                                     "(checkpoint, exit 4)",
                                     store_enum<GuardPolicy>(ACCELKIT_FIELD(guard_policy))));
  add_number(s, "guard_temperature", 0.0, "ACCELKIT_GUARD_TEMPERATURE",
             "the guard's threshold in C: 0 = the device's own slowdown threshold, else 30-150",
             check_guard_temperature, store_as<double>(ACCELKIT_FIELD(guard_temperature)));
  add_number(s, "guard_hysteresis", 5.0, "ACCELKIT_GUARD_HYSTERESIS",
             "C below the threshold before a pause ends (at most 50)",
             check_guard_hysteresis, store_as<double>(ACCELKIT_FIELD(guard_hysteresis)));
  add_number(s, "guard_power", 0.0, "ACCELKIT_GUARD_POWER",
             "warn when the device draws more watts than this (0 = never)",
             nullptr, store_as<double>(ACCELKIT_FIELD(guard_power)));
}

// Measuring the candidates, tuning the first steps, and the cache of those decisions.
void add_tuning(std::vector<SettingSpec>& s) {
  s.push_back(flag_spec("autotune", false, "ACCELKIT_AUTOTUNE", "benchmark the candidates and cache the decision",
                        store_as<bool>(ACCELKIT_FIELD(autotune))));
  s.push_back(flag_spec("step_tuning", true, "ACCELKIT_STEP_TUNING",
                        "time the program's first training steps under the plan, fp32, fewer threads and LibTorch's "
                        "kernels, keep the fastest (cached)",
                        store_as<bool>(ACCELKIT_FIELD(step_tuning))));
  s.push_back(flag_spec("step_retune", true, "ACCELKIT_STEP_RETUNE",
                        "keep watching the step tuner's choice (other processes' load, the step's time) and time "
                        "the candidates the change can favour again when either changes for 3 windows (at least "
                        "1.5 s of steps)",
                        store_as<bool>(ACCELKIT_FIELD(step_retune))));
  s.push_back(enum_spec<Toggle>("channels_last", Toggle::automatic, "ACCELKIT_CHANNELS_LAST",
                                "step tuning also times the plan (and fp32) with the prepared model's 2-D convolution weights "
                                "channels-last: auto (where the program's first step view()s no 4-D tensor in a way "
                                "channels-last activations fail; reshape() works), on (without that check), or off",
                                store_enum<Toggle>(ACCELKIT_FIELD(channels_last))));
  s.push_back(flag_spec("autotune_cache", true, "ACCELKIT_AUTOTUNE_CACHE",
                        "read and write the auto-tuner's cache (--no-cache: neither)",
                        store_as<bool>(ACCELKIT_FIELD(autotune_cache))));
  s.back().option = "--no-cache";  // on by default: the command line only turns it off
  s.back().option_turns_off = true;
}

// How plugin files are examined, and which plugins and capabilities are asked for.
void add_plugins(std::vector<SettingSpec>& s) {
  s.push_back(flag_spec("plugin_scan", true, "ACCELKIT_PLUGIN_SCAN",
                        "examine each new plugin file in a separate process first (off: in this one, e.g. under a "
                        "debugger)",
                        store_as<bool>(ACCELKIT_FIELD(plugin_scan))));
  s.push_back(int_spec("plugin_scan_timeout", 10, 1, 600, "ACCELKIT_PLUGIN_SCAN_TIMEOUT",
                       "seconds a plugin may take to be examined before it is killed (then once more, longer, before it is "
                       "refused for the run)",
                       store_as<int>(ACCELKIT_FIELD(plugin_scan_timeout))));
  s.push_back(int_spec("plugin_scan_memory", 4096, 0, INT32_MAX, "ACCELKIT_PLUGIN_SCAN_MEMORY",
                       "MiB of data the examining process may allocate (0 = no limit)",
                       store_as<std::int64_t>(ACCELKIT_FIELD(plugin_scan_memory))));
  s.push_back(list_spec("prefer", "ACCELKIT_PREFER", "plugins to prefer, in order", check_plugins,
                        store_as<std::vector<std::string>>(ACCELKIT_FIELD(prefer))));
  s.push_back(list_spec("require", "ACCELKIT_REQUIRE", "capabilities the device must have", check_capabilities,
                        store_as<std::vector<std::string>>(ACCELKIT_FIELD(require))));
  s.push_back(list_spec("extension_devices", "ACCELKIT_EXTENSION_DEVICES",
                        "plugins whose new device type is registered with LibTorch at start, as a vendor's LibTorch "
                        "extension would be, and offered only through the device-generic torch plugin",
                        check_plugins, store_as<std::vector<std::string>>(ACCELKIT_FIELD(extension_devices))));
}

// Data-parallel runs: the collective backend, its timeout and gradient buckets.
void add_data_parallel(std::vector<SettingSpec>& s) {
  s.push_back(text_spec("dist_backend", "auto", {"auto", "gloo", "nccl"}, "ACCELKIT_DIST_BACKEND",
                        "collective backend of a data-parallel run: auto (the device plugin's), gloo or nccl",
                        store_as<std::string>(ACCELKIT_FIELD(dist_backend))));
  s.push_back(int_spec("dist_timeout", 300, 1, 86400, "ACCELKIT_DIST_TIMEOUT",
                       "seconds a data-parallel rendezvous or collective waits for a rank before the run fails",
                       store_as<int>(ACCELKIT_FIELD(dist_timeout))));
  s.push_back(int_spec("dist_bucket_mb", 25, 1, 1024, "ACCELKIT_DIST_BUCKET_MB",
                       "MiB of gradients all-reduced together in a data-parallel run",
                       store_as<int>(ACCELKIT_FIELD(dist_bucket_mb))));
}

// Every setting, in the order the settings table and `accelkit help settings` list them.
std::vector<SettingSpec> make_schema() {
  std::vector<SettingSpec> s;
  add_device_choice(s);
  add_compute(s);
  add_batching(s);
  s.push_back(enum_spec<Profile>("profile", Profile::balanced, "ACCELKIT_PROFILE", "tuning profile",
                                 store_enum<Profile>(ACCELKIT_FIELD(profile))));
  add_guard(s);
  add_tuning(s);
  s.push_back(enum_spec<LogLevel>("log_level", LogLevel::warn, "ACCELKIT_LOG_LEVEL", "log level",
                                  store_enum<LogLevel>(ACCELKIT_FIELD(log_level))));
  add_plugins(s);
  add_data_parallel(s);
  add_routing(s);
  add_train(s);
  return s;
}

#undef ACCELKIT_FIELD

}  // namespace

const std::vector<SettingSpec>& settings_schema() {
  static const std::vector<SettingSpec> schema = make_schema();
  return schema;
}

const SettingSpec* find_setting(std::string_view key) {
  for (const auto& spec : settings_schema())
    if (spec.key == key) return &spec;
  return nullptr;
}

const std::vector<std::string>& settings_sections() {
  static const std::vector<std::string> sections = {"routing", "train"};
  return sections;
}

std::string settings_table_markdown() {
  auto code = [](const std::string& s) { return s.empty() ? std::string("-") : "`" + s + "`"; };
  std::string out =
      "| key | type | default | values | environment | option | meaning |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const auto& spec : settings_schema()) {
    std::string values = spec.allowed.empty() ? "" : text::join(spec.allowed, " \\| ");
    if (values.empty() && spec.type == SettingType::integer)
      values = spec.max == INT64_MAX ? ">= " + std::to_string(spec.min)
                                     : std::to_string(spec.min) + "-" + std::to_string(spec.max);
    if (values.empty() && spec.type == SettingType::number) values = spec.min_exclusive ? "> 0" : ">= 0";
    if (spec.type == SettingType::boolean) values = "true \\| false";
    std::string help;
    for (char c : spec.help) help += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '|' ? "\\|" : std::string(1, c);
    std::string option = spec.option;
    if (spec.type == SettingType::boolean && !option.empty() && !spec.option_turns_off &&
        std::get<bool>(spec.default_value))
      option += ", --no-" + option.substr(2);
    out += "| `" + spec.key + "` | " + to_string(spec.type) + " | `" + format_value(spec.default_value) + "` | " +
           (values.empty() ? "any" : values) + " | " + code(spec.env) + " | " + code(option) + " | " + help +
           " |\n";
  }
  return out;
}

// ---- nearest key ---------------------------------------------------------------------------

namespace {

std::string normalise_key(std::string_view key) {
  std::string out(key);
  for (auto& c : out) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Optimal string alignment distance (a transposition counts as one edit), three rows.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

// The single nearest of `candidates` within a few edits (or a unique prefix), else "". A word
// far longer than every candidate has no guess and costs nothing.
std::string nearest_word(std::string_view word, const std::vector<std::string>& candidates) {
  std::size_t longest = 0;
  for (const auto& c : candidates) longest = std::max(longest, c.size());
  if (word.empty() || word.size() > longest + 3) return {};
  const std::string w = normalise_key(word);
  const std::size_t limit = w.size() <= 3 ? 1 : w.size() <= 6 ? 2 : 3;
  std::string best;
  std::size_t best_d = limit + 1;
  bool tie = false;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(w, c);
    if (d < best_d) {
      best_d = d;
      best = c;
      tie = false;
    } else if (d == best_d) {
      tie = true;
    }
  }
  if (!best.empty()) return tie ? std::string() : best;  // a guess between two is no help
  if (w.size() >= 4) {  // "sdpa" -> "sdpa_backend"
    std::string only;
    for (const auto& c : candidates)
      if (c.compare(0, w.size(), w) == 0) {
        if (!only.empty()) return {};
        only = c;
      }
    return only;
  }
  return {};
}

namespace {

// Keys directly under `section` ("" = the top level), without the section's prefix.
std::vector<std::string> keys_in(std::string_view section) {
  std::vector<std::string> keys;
  for (const auto& spec : settings_schema()) {
    const auto dot = spec.key.find('.');
    if (section.empty() ? dot == std::string::npos
                        : dot == section.size() && spec.key.compare(0, dot, section) == 0)
      keys.push_back(section.empty() ? spec.key : spec.key.substr(dot + 1));
  }
  return keys;
}

}  // namespace

std::string nearest_setting_key(std::string_view key) { return nearest_word(key, keys_in("")); }

// ---- checking and typing values ------------------------------------------------------------

namespace {

const char* with_article(SettingType t) {
  switch (t) {
    case SettingType::boolean: return "a boolean";
    case SettingType::integer: return "an integer";
    case SettingType::number: return "a number";
    case SettingType::string: return "a string";
    case SettingType::string_list: return "an array of strings";
  }
  return "a value";
}

SettingType type_of(const SettingValue& v) { return static_cast<SettingType>(v.index()); }

std::string format_number(double v) { return format_value(SettingValue{v}); }

// Checks a value of the right type against the spec's enum, bounds and shape. Returns the
// problem ("must be ..., got ...") or "".
std::string check_value(const SettingSpec& spec, const SettingValue& value) {
  if (type_of(value) != spec.type)
    return std::string("must be ") + with_article(spec.type) + ", got " + to_string(type_of(value));
  if (auto* i = std::get_if<std::int64_t>(&value)) {
    if (*i < spec.min || *i > spec.max) {
      if (spec.max == INT64_MAX) return "must be at least " + std::to_string(spec.min) + ", got " + std::to_string(*i);
      return "must be between " + std::to_string(spec.min) + " and " + std::to_string(spec.max) + ", got " +
             std::to_string(*i);
    }
  } else if (auto* d = std::get_if<double>(&value)) {
    if (!std::isfinite(*d)) return "must be a finite number, got " + format_number(*d);
    const auto min = static_cast<double>(spec.min);
    if (spec.min_exclusive ? *d <= min : *d < min)
      return std::string("must be ") + (spec.min_exclusive ? "greater than " : "at least ") + format_number(min) +
             ", got " + format_number(*d);
  } else if (auto* s = std::get_if<std::string>(&value)) {
    if (!spec.allowed.empty() && std::find(spec.allowed.begin(), spec.allowed.end(), *s) == spec.allowed.end()) {
      std::string msg = "must be one of " + text::join(spec.allowed, ", ") + ", got '" + text::shorten(*s) + "'";
      if (auto guess = nearest_word(*s, spec.allowed); !guess.empty()) msg += "; did you mean '" + guess + "'?";
      return msg;
    }
  }
  return spec.check ? spec.check(value) : std::string();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Text from the environment or the command line, typed by the spec. Lists are comma separated.
std::optional<SettingValue> parse_text(const SettingSpec& spec, std::string_view raw, std::string& problem) {
  const std::string_view t = trim(raw);
  switch (spec.type) {
    case SettingType::boolean: {
      const std::string b = normalise_key(t.substr(0, 8));
      if (t.size() <= 8 && (b == "true" || b == "1" || b == "yes" || b == "on")) return SettingValue{true};
      if (t.size() <= 8 && (b == "false" || b == "0" || b == "no" || b == "off")) return SettingValue{false};
      problem = "must be a boolean (true/false, 1/0, yes/no, on/off), got '" + text::shorten(raw) + "'";
      return std::nullopt;
    }
    case SettingType::integer: {
      std::int64_t v = 0;
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (t.empty() || ec != std::errc() || end != t.data() + t.size()) {
        problem = ec == std::errc::result_out_of_range
                      ? "must be an integer that fits in 64 bits, got '" + text::shorten(raw) + "'"
                      : "must be an integer, got '" + text::shorten(raw) + "'";
        return std::nullopt;
      }
      return SettingValue{v};
    }
    case SettingType::number: {
      char* end = nullptr;
      const std::string copy(t);
      const double v = std::strtod(copy.c_str(), &end);
      if (copy.empty() || end != copy.c_str() + copy.size()) {
        problem = "must be a number, got '" + text::shorten(raw) + "'";
        return std::nullopt;
      }
      return SettingValue{v};
    }
    case SettingType::string:
      return SettingValue{std::string(t)};
    case SettingType::string_list: {
      std::vector<std::string> items;
      std::size_t start = 0;
      while (start <= t.size()) {
        std::size_t comma = t.find(',', start);
        if (comma == std::string_view::npos) comma = t.size();
        auto item = trim(t.substr(start, comma - start));
        if (!item.empty()) items.emplace_back(item);
        start = comma + 1;
      }
      return SettingValue{std::move(items)};
    }
  }
  return std::nullopt;
}

std::optional<SettingValue> from_toml(const SettingSpec& spec, const toml::node& node, std::string& problem) {
  auto wrong = [&](const char* got) {
    problem = std::string("must be ") + with_article(spec.type) + ", got " + got;
    return std::nullopt;
  };
  switch (spec.type) {
    case SettingType::boolean:
      if (auto* b = node.as_boolean()) return SettingValue{b->get()};
      return wrong(toml_type_name(node.type()));
    case SettingType::integer:
      if (auto* i = node.as_integer()) return SettingValue{i->get()};
      return wrong(toml_type_name(node.type()));
    case SettingType::number:
      if (auto* i = node.as_integer()) return SettingValue{static_cast<double>(i->get())};
      if (auto* f = node.as_floating_point()) return SettingValue{f->get()};
      return wrong(toml_type_name(node.type()));
    case SettingType::string:
      if (auto* s = node.as_string()) return SettingValue{s->get()};
      return wrong(toml_type_name(node.type()));
    case SettingType::string_list: {
      auto* arr = node.as_array();
      if (!arr) return wrong(toml_type_name(node.type()));
      std::vector<std::string> items;
      for (std::size_t i = 0; i < arr->size(); ++i) {
        auto* s = (*arr)[i].as_string();
        if (!s) {
          const std::string got =
              std::string("array with ") + toml_type_name((*arr)[i].type()) + " at index " + std::to_string(i);
          return wrong(got.c_str());
        }
        items.push_back(s->get());
      }
      return SettingValue{std::move(items)};
    }
  }
  return std::nullopt;
}

std::string did_you_mean(std::string_view key, const std::vector<std::string>& among, const char* prefix = "") {
  auto guess = nearest_word(key, among);
  if (guess.empty()) return {};
  return std::string("; did you mean '") + prefix + guess + "'?";
}

// One validated value from one layer.
struct Entry {
  const SettingSpec* spec;
  Effective effective;
};
using Layer = std::vector<Entry>;

// Collects every problem so that a bad input is reported in full, then refused whole.
class Problems {
 public:
  void add(std::string msg) {
    if (list_.size() < kMax) list_.push_back(std::move(msg));
    else ++dropped_;
  }
  void raise_if_any() const {
    if (list_.empty()) return;
    std::string all = text::join(list_, "\n");
    if (dropped_) all += "\n(and " + std::to_string(dropped_) + " more problems)";
    throw SettingsError(all);
  }

 private:
  static constexpr std::size_t kMax = 20;  // a file of garbage is not reported line by line
  std::vector<std::string> list_;
  std::size_t dropped_ = 0;
};

// An unknown key directly in `section` ("" = the top level).
std::string unknown_key(const std::string& section, const std::string& key, const std::string& at, bool is_table) {
  if (section.empty()) {
    std::string msg = "unknown setting '" + text::shorten(key) + "' in " + at + did_you_mean(key, keys_in(""));
    if (is_table) msg += " ([" + text::shorten(key) + "] is a table; settings are top-level keys, e.g. device = \"cpu\")";
    return msg;
  }
  const std::vector<std::string> keys = keys_in(section);
  const std::string what = section == "routing" ? "operation class '" + section + "." + text::shorten(key) + "'"
                                                : "[" + section + "] key '" + text::shorten(key) + "'";
  std::string msg = "unknown " + what + " in " + at;
  if (std::string guess = did_you_mean(key, keys); !guess.empty()) return msg + guess;
  return msg + " (valid keys: " + text::join(keys) + ")";
}

// Walks a TOML table: schema keys, sections (recursed into) or unknown keys.
void read_table(const toml::table& table, const std::string& section, const std::string& path, Layer& out,
                Problems& problems) {
  // In file order, so that problems are reported top to bottom (the table is sorted by key).
  for (const auto& [k_ptr, node_ptr] : config_detail::in_file_order(table)) {
    const std::string name(k_ptr->str());
    const toml::node& node = *node_ptr;
    const std::string key = section.empty() ? name : section + "." + name;
    const std::string at = toml_position(path, k_ptr->source());
    const auto& sections = settings_sections();
    if (const SettingSpec* spec = find_setting(key)) {
      std::string problem;
      auto value = from_toml(*spec, node, problem);
      if (value && (problem = check_value(*spec, *value)).empty())
        out.push_back({spec, {std::move(*value), Origin::file, at, "set in the config file"}});
      else
        problems.add("'" + key + "' in " + at + " " + problem);
    } else if (section.empty() && std::find(sections.begin(), sections.end(), key) != sections.end()) {
      if (node.is_table())
        read_table(*node.as_table(), key, path, out, problems);
      else
        problems.add("'" + key + "' in " + at + " must be a table ([" + key + "]), got " + toml_type_name(node.type()));
    } else if (std::string near = section.empty() && node.is_table() ? nearest_word(key, sections) : "";
               !near.empty()) {
      problems.add("unknown table [" + text::shorten(key) + "] in " + at + "; did you mean [" + near + "]?");
    } else {
      problems.add(unknown_key(section, name, at, node.is_table()));
    }
  }
}

Layer read_file(const std::string& path, const std::string& from, Problems& problems) {
  Layer layer;
  const config_detail::ParsedConfig config = config_detail::parse_config(path);
  if (!config.read_error.empty()) {
    problems.add("cannot read config file " + text::shorten(path, 200) + " (from " + from + "): " + config.read_error);
    return layer;
  }
  if (!config.root) {
    problems.add(config.parse_error);
    return layer;
  }
  read_table(*config.root, "", path, layer, problems);
  return layer;
}

using Env = std::map<std::string, std::string>;

Env read_process_env() {
  Env env;
  auto take = [&env](const std::string& name) {
    if (const char* v = secure_getenv(name.c_str())) env[name] = v;
  };
  take("ACCELKIT_CONFIG");
  for (const auto& spec : settings_schema())
    if (!spec.env.empty()) take(spec.env);
  return env;
}

// An empty variable counts as unset.
Layer read_env(const Env& env, Problems& problems) {
  Layer layer;
  for (const auto& spec : settings_schema()) {
    if (spec.env.empty()) continue;
    auto it = env.find(spec.env);
    if (it == env.end() || trim(it->second).empty()) continue;
    std::string problem;
    auto value = parse_text(spec, it->second, problem);
    if (value && (problem = check_value(spec, *value)).empty())
      layer.push_back({&spec, {std::move(*value), Origin::env, spec.env, "set in the environment"}});
    else
      problems.add(spec.env + " " + problem);
  }
  return layer;
}

// The option that sets `value`: a boolean's false is its --no- form.
std::string cli_spelling(const SettingSpec& spec, const SettingValue& value) {
  const auto* b = std::get_if<bool>(&value);
  if (!b || *b || spec.option_turns_off) return spec.option;
  return "--no-" + spec.option.substr(2);
}

// A repeated option replaces the earlier one, except lists, which accumulate.
Layer read_cli(const std::vector<std::pair<std::string, std::string>>& cli, Problems& problems) {
  Layer layer;
  for (const auto& [name, value_text] : cli) {
    const std::string key = normalise_key(name);
    const SettingSpec* spec = find_setting(key);
    if (!spec || spec->option.empty()) {
      std::string opt = option_for(text::shorten(name));
      std::string hint = did_you_mean(key, keys_in(""), "--");
      std::replace(hint.begin(), hint.end(), '_', '-');
      problems.add("unknown option '" + opt + "'" + hint);
      continue;
    }
    std::string problem;
    auto value = parse_text(*spec, value_text, problem);
    if (value && (problem = check_value(*spec, *value)).empty()) {
      auto prev = std::find_if(layer.begin(), layer.end(), [&](const Entry& e) { return e.spec == spec; });
      if (prev != layer.end() && spec->type == SettingType::string_list) {
        auto& list = std::get<std::vector<std::string>>(prev->effective.value);
        for (auto& item : std::get<std::vector<std::string>>(*value)) list.push_back(std::move(item));
      } else {
        if (prev != layer.end()) layer.erase(prev);
        layer.push_back({spec, {*value, Origin::cli, cli_spelling(*spec, *value), "set on the command line"}});
      }
    } else {
      problems.add(spec->option + " " + problem);
    }
  }
  return layer;
}

struct ProfileStep {
  Profile profile;
  const char* key;
  SettingValue value;
  const char* why;
};

const std::vector<ProfileStep>& profile_steps() {
  using P = Profile;
  static const std::vector<ProfileStep> steps = {
      {P::ultra_low_overhead, "compile", std::string("off"), "ultra_low_overhead turns off graph capture"},
      {P::ultra_low_overhead, "sampler", false, "ultra_low_overhead turns off the sampler thread"},
      {P::ultra_low_overhead, "autotune", false, "ultra_low_overhead turns off benchmarking"},
      {P::ultra_low_overhead, "step_tuning", false, "ultra_low_overhead turns off timing the first steps"},
      {P::ultra_low_overhead, "guard_interval", 0.0, "ultra_low_overhead turns off the thermal guard's sampling"},
      {P::maximum_performance, "compile", std::string("graph"), "maximum_performance turns on graph capture"},
      {P::maximum_performance, "fused_optimizer", std::string("on"), "maximum_performance turns on the fused optimizer"},
      {P::maximum_performance, "tf32", std::string("on"), "maximum_performance turns on TF32"},
      {P::maximum_performance, "master_weights", std::string("on"),
       "maximum_performance keeps a bf16 model's fp32 master weights in the fused optimizer"},
      {P::automatic, "autotune", true, "auto benchmarks the candidates and caches the decision"},
      {P::automatic, "master_weights", std::string("on"),
       "auto times the bf16 + fused candidates with fp32 master weights in the optimizer"},
  };
  return steps;
}

// The profile from the highest layer that sets it.
Profile chosen_profile(const std::vector<const Layer*>& highest_first) {
  for (const Layer* layer : highest_first)
    for (auto it = layer->rbegin(); it != layer->rend(); ++it)
      if (it->spec->key == "profile") return enum_from<Profile>(std::get<std::string>(it->effective.value));
  return Profile::balanced;
}

// The config file to read and which input named it; problems for an empty name.
std::optional<std::string> config_path(const SettingsInputs& inputs, const Env& env, std::string& from,
                                       Problems& problems) {
  std::optional<std::string> config;
  if (inputs.config_path) {
    config = *inputs.config_path;
    from = "--config";
    if (config->empty()) problems.add("--config must name a file, got ''");
  } else if (auto it = env.find("ACCELKIT_CONFIG"); it != env.end() && !it->second.empty()) {
    config = it->second;
    from = "ACCELKIT_CONFIG";
  }
  if (!config || config->empty()) return std::nullopt;
  std::error_code ec;
  auto abs = std::filesystem::absolute(*config, ec);
  if (!ec) {
    abs = abs.lexically_normal();
    if (!abs.has_filename() && abs.has_parent_path()) abs = abs.parent_path();  // "dir/" -> "dir"
    config = abs.string();
  }
  return config;
}

}  // namespace

Settings::Settings() {
  for (const auto& spec : settings_schema())
    values_[spec.key] = Effective{spec.default_value, Origin::default_value, "built-in", "built-in default"};
  build_config();
}

Settings Settings::resolve(const SettingsInputs& inputs) {
  const Env env = inputs.env ? *inputs.env : read_process_env();
  Problems problems;
  std::string config_from;
  const std::optional<std::string> config = config_path(inputs, env, config_from, problems);
  Layer file;
  if (config) file = read_file(*config, config_from, problems);
  Layer env_layer = read_env(env, problems);
  Layer cli = read_cli(inputs.cli, problems);
  problems.raise_if_any();

  Settings s;
  s.config_file_ = config;
  const Profile profile = chosen_profile({&cli, &env_layer, &file});
  for (const auto& step : profile_steps())
    if (profile == step.profile)
      s.values_[step.key] =
          Effective{step.value, Origin::profile, std::string("profile ") + to_string(profile), step.why};
  for (const Layer* layer : {&file, &env_layer, &cli})
    for (const auto& entry : *layer) s.values_[entry.spec->key] = entry.effective;
  s.build_config();
  // Settings that are fine alone but not together.
  if (std::string problem = train_settings_problem(s.config_); !problem.empty()) throw SettingsError(problem);
  return s;
}

void Settings::build_config() {
  for (const auto& spec : settings_schema()) spec.store(config_, values_.at(spec.key));
}

const Effective& Settings::get(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw std::out_of_range("unknown setting '" + text::shorten(key) + "'");
  return it->second;
}

std::vector<std::pair<std::string, Effective>> Settings::all() const {
  std::vector<std::pair<std::string, Effective>> out;
  for (const auto& spec : settings_schema()) out.emplace_back(spec.key, values_.at(spec.key));
  return out;
}

}  // namespace accelkit
