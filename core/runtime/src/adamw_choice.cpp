#include "plugin_call.hpp"
#include "accelkit/adamw_choice.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/optim/optimizer.h>

#include "accelkit/autotune.hpp"
#include "accelkit/atomic_file.hpp"
#include "accelkit/context.hpp"
#include "accelkit/machine_load.hpp"
#include "accelkit/decision_cache.hpp"
#include "accelkit/device_sync.hpp"

namespace accelkit {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kFormat = 1;
constexpr int kWarmup = 3;
constexpr int kTimed = 7;

std::string names_of(const std::vector<AdamWImplementation>& impls) {
  std::string out;
  for (const auto& i : impls) out += (out.empty() ? "" : ", ") + i.name;
  return out;
}

// Everything the answer depends on: the device, the versions, the thread count, the offer.
std::string fingerprint(const Context& ctx, const std::vector<AdamWImplementation>& impls, int threads) {
  return autotune_device_fingerprint(ctx) + " | " + autotune_versions(ctx) + " | threads " +
         std::to_string(threads > 0 ? threads : at::get_num_threads()) + " | " + names_of(impls);
}

std::string entry_path(const std::string& dir, const std::string& fp) {
  return (fs::path(dir) / "adamw" / (decision_cache::hash_hex(fp) + ".json")).string();
}

std::string fmt_ms(double ms) {
  std::ostringstream s;
  s.precision(ms < 10 ? 2 : 1);
  s << std::fixed << ms << " ms";
  return s.str();
}

std::string why_of(const AdamWImplChoice& c) {
  std::string figures;
  for (const auto& [name, ms] : c.median_ms) figures += (figures.empty() ? "" : ", ") + name + " " + fmt_ms(ms);
  return "fastest AdamW step on this device (" + figures + "; median of " + std::to_string(kTimed) +
         " steps over 8.4M fp32 parameters)";
}

// nullopt with *problem empty: no entry; with *problem set: an entry that cannot be used.
std::optional<AdamWImplChoice> read_entry(const std::string& path, const std::string& fp,
                                          const std::vector<AdamWImplementation>& impls, std::string* problem) {
  const std::optional<std::string> text = decision_cache::read_entry_text(path, problem);
  if (!text) return std::nullopt;
  try {
    const json j = json::parse(*text);
    if (j.at("format").get<int>() != kFormat) {
      *problem = "format " + j.at("format").dump() + ", expected " + std::to_string(kFormat);
      return std::nullopt;
    }
    if (j.at("fingerprint").get<std::string>() != fp) {
      *problem = "it was measured for another device, version or thread count";
      return std::nullopt;
    }
    AdamWImplChoice c;
    c.name = j.at("name").get<std::string>();
    for (const auto& m : j.at("median_ms")) c.median_ms.emplace_back(m.at(0).get<std::string>(), m.at(1).get<double>());
    c.created = j.at("created").get<std::string>();
    auto it = std::find_if(impls.begin(), impls.end(), [&](const AdamWImplementation& i) { return i.name == c.name; });
    if (it == impls.end()) {
      *problem = "it names '" + c.name + "', which the plugin no longer offers";
      return std::nullopt;
    }
    c.description = it->description;
    c.origin = "cache";
    c.cache_file = path;
    c.why = why_of(c) + ", measured " + c.created;
    return c;
  } catch (const std::exception& e) {
    *problem = std::string("unreadable: ") + e.what();
    return std::nullopt;
  }
}

double time_step(torch::optim::Optimizer& opt, c10::Device device) {
  detail::synchronize(device);
  const auto t0 = std::chrono::steady_clock::now();
  opt.step();
  detail::synchronize(device);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One implementation's optimizer and its timed steps.
struct AdamWTrial {
  std::string name;
  std::shared_ptr<torch::optim::Optimizer> opt;
  std::vector<double> ms;
};

// An optimizer of each implementation, over the same parameters and gradients, each on its own
// copy; drawn from a generator of our own, so the program's random stream is left as it was.
std::vector<AdamWTrial> adamw_trials(Optimizer& optimizer, const std::vector<AdamWImplementation>& impls,
                                     c10::Device device) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0xada);
  std::vector<at::Tensor> init, grads;
  for (int i = 0; i < 4; ++i) {
    init.push_back(at::randn({1024, 2048}, gen, at::kFloat).to(device));
    grads.push_back(at::randn({1024, 2048}, gen, at::kFloat).mul_(1e-2).to(device));
  }
  std::vector<AdamWTrial> trials;
  for (const auto& impl : impls) {
    std::vector<at::Tensor> params;
    for (std::size_t i = 0; i < init.size(); ++i) {
      params.push_back(init[i].clone().requires_grad_(true));
      params.back().mutable_grad() = grads[i].clone();
    }
    AdamWConfig config;
    config.implementation = impl.name;
    auto made = optimizer.create_adamw(params, config);
    if (!made.ok() || !made.value())
      throw std::runtime_error("AdamW implementation '" + impl.name + "' offered by the plugin cannot be created: " +
                               (made.ok() ? std::string("null") : made.status().message()));
    trials.push_back({impl.name, made.value(), {}});
  }
  return trials;
}

// The trials' steps in rounds (each implementation in turn), the first kWarmup untimed.
void time_trials(std::vector<AdamWTrial>& trials, c10::Device device) {
  for (int round = 0; round < kWarmup + kTimed; ++round)
    for (auto& t : trials) {
      const double ms = time_step(*t.opt, device);
      if (round >= kWarmup) t.ms.push_back(ms);
    }
}

// The implementation with the lowest median step, with every median and why.
AdamWImplChoice fastest_of(std::vector<AdamWTrial>& trials, const std::vector<AdamWImplementation>& impls) {
  AdamWImplChoice c;
  double best = 0;
  for (auto& t : trials) {
    std::sort(t.ms.begin(), t.ms.end());
    const double med = t.ms[t.ms.size() / 2];
    c.median_ms.emplace_back(t.name, med);
    if (c.name.empty() || med < best) c.name = t.name, best = med;
  }
  for (const auto& i : impls)
    if (i.name == c.name) c.description = i.description;
  c.origin = "benchmark";
  c.created = decision_cache::utc_now();
  c.why = why_of(c);
  return c;
}

// Writes the choice's cache entry at `path` (c.cache_file once written); a failure is a warning.
void write_entry(const std::string& path, const std::string& fp, AdamWImplChoice& c) {
  json j{{"format", kFormat}, {"fingerprint", fp}, {"name", c.name}, {"created", c.created}};
  json m = json::array();
  for (const auto& [name, ms] : c.median_ms) m.push_back(json::array({name, ms}));
  j["median_ms"] = m;
  try {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    write_file_atomically(path, j.dump(2) + "\n");
    c.cache_file = path;
  } catch (const std::exception& e) {
    spdlog::warn("adamw: cannot write the cache entry {}: {}", path, e.what());
  }
}

}  // namespace

AdamWImplChoice cached_adamw_implementation(const Context& ctx, Optimizer& optimizer, int threads) {
  const auto impls = call_plugin(ctx.require_device().plugin + " plugin", "Optimizer::adamw_implementations()",
                                 [&] { return optimizer.adamw_implementations(); });
  AdamWImplChoice c;
  if (impls.size() == 1) {
    c.name = impls.front().name;
    c.description = impls.front().description;
    c.origin = "only";
    c.why = "the only AdamW implementation the plugin offers";
    return c;
  }
  const std::string dir = decision_cache_dir();
  if (impls.empty() || dir.empty()) return c;
  const std::string fp = fingerprint(ctx, impls, threads);
  std::string problem;
  if (auto cached = read_entry(entry_path(dir, fp), fp, impls, &problem)) return *cached;
  return c;
}

AdamWImplChoice choose_adamw_implementation(const Context& ctx, Optimizer& optimizer, c10::Device device,
                                            bool use_cache) {
  const auto impls = call_plugin(ctx.require_device().plugin + " plugin", "Optimizer::adamw_implementations()",
                                 [&] { return optimizer.adamw_implementations(); });
  if (impls.empty()) throw std::runtime_error("the plugin's optimizer offers no AdamW implementation");
  if (impls.size() == 1) return cached_adamw_implementation(ctx, optimizer);

  const std::string fp = fingerprint(ctx, impls, 0);
  const std::string dir = use_cache ? decision_cache_dir() : std::string();
  const std::string path = dir.empty() ? std::string() : entry_path(dir, fp);
  if (!path.empty()) {
    std::string problem;
    if (auto cached = read_entry(path, fp, impls, &problem)) return *cached;
    if (!problem.empty()) spdlog::warn("adamw: ignoring the cache entry {}: {}; measuring again", path, problem);
  }

  spdlog::info("adamw: timing {} AdamW implementations on {} ({})", impls.size(), device.str(), names_of(impls));
  std::vector<AdamWTrial> trials = adamw_trials(optimizer, impls, device);
  const std::optional<CpuSample> load_start = sample_cpu();
  time_trials(trials, device);
  AdamWImplChoice c = fastest_of(trials, impls);
  // Timed while other processes took the cores it needed: this call's choice, not the cache's.
  const std::string contention = device.is_cpu() ? contention_since(load_start, at::get_num_threads()) : std::string();
  if (!path.empty() && !contention.empty()) {
    c.why += "; not cached: while the implementations were timed, " + contention + ", so the next run times them again";
    spdlog::warn("adamw: {}", c.why);
  } else if (!path.empty()) {
    write_entry(path, fp, c);
  }
  return c;
}

}  // namespace accelkit
