// Runtime::optimize_for_inference: candidates, measurement, the choice, the cache.
#include "accelkit/inference.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "accelkit/atomic_file.hpp"
#include "accelkit/device_sync.hpp"
#include "accelkit/machine_load.hpp"
#include "accelkit/runtime.hpp"
#include "autotune_cache.hpp"
#include "jit_walk.hpp"
#include "median.hpp"
#include "strings.hpp"

namespace accelkit {

std::vector<at::Tensor> flatten_outputs(const c10::IValue& v) {
  std::vector<at::Tensor> out;
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) {
      auto inner = flatten_outputs(e);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      auto inner = flatten_outputs(e);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  } else if (v.isGenericDict()) {
    for (const auto& item : v.toGenericDict()) {
      auto inner = flatten_outputs(item.value());
      out.insert(out.end(), inner.begin(), inner.end());
    }
  }
  return out;
}

OutputError compare_outputs(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& ref) {
  const OutputError broken{INFINITY, INFINITY, 0};
  if (got.size() != ref.size()) return broken;
  double num = 0, den = 0, dot = 0, ng = 0, max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i].sizes() != ref[i].sizes()) return broken;
    if (!ref[i].is_floating_point()) {
      if (!at::equal(got[i].cpu(), ref[i].cpu())) return broken;
      continue;
    }
    const at::Tensor g = got[i].detach().to(at::kCPU, at::kDouble).flatten();
    const at::Tensor r = ref[i].detach().to(at::kCPU, at::kDouble).flatten();
    num += (g - r).pow(2).sum().item<double>();
    den += r.pow(2).sum().item<double>();
    dot += (g * r).sum().item<double>();
    ng += g.pow(2).sum().item<double>();
    if (g.numel() > 0) {
      max_diff = std::max(max_diff, (g - r).abs().max().item<double>());
      max_ref = std::max(max_ref, r.abs().max().item<double>());
    }
  }
  if (!std::isfinite(num) || !std::isfinite(ng)) return broken;
  OutputError e;
  e.rel_error = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  e.max_rel_error = max_ref > 0 ? max_diff / max_ref : max_diff;
  e.cosine = (ng > 0 && den > 0) ? dot / std::sqrt(ng * den) : (num == 0 ? 1.0 : 0.0);
  return e;
}

namespace {

namespace fs = std::filesystem;

// One way of preparing the module.
struct Recipe {
  const char* name;
  const char* description;
  bool freeze = false;
  bool optimize = false;           // torch::jit::optimize_for_inference after freezing
  at::ScalarType dtype = at::kFloat;  // weights and floating inputs
  bool channels_last = false;      // 4-D weights and inputs
};

const std::vector<Recipe>& recipes() {
  static const std::vector<Recipe> r = {
      {"as_is", "the module as loaded (eval, no autograd), fp32"},
      {"frozen", "frozen (torch::jit::freeze: weights as constants, conv-bn folded), fp32", true},
      {"optimized", "frozen + torch::jit::optimize_for_inference (MKLDNN layouts and fusions), fp32", true, true},
      {"channels_last", "frozen, 4-D weights and inputs channels-last, fp32", true, false, at::kFloat, true},
      {"bf16", "frozen, bf16 weights cast once, inputs cast to bf16, outputs back to fp32", true, false,
       at::kBFloat16},
      {"bf16_channels_last", "frozen, bf16 weights, 4-D weights and inputs channels-last", true, false, at::kBFloat16,
       true},
      {"bf16_optimized", "frozen + optimize_for_inference, bf16 weights, 4-D weights and inputs channels-last", true,
       true, at::kBFloat16, true},
  };
  return r;
}

class Prepared final : public OptimizedModule {
 public:
  Prepared(torch::jit::Module m, const Recipe& r, c10::Device device, InferenceDecision d)
      : module_(std::move(m)), recipe_(r), device_(device), decision_(std::move(d)) {}

  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    c10::InferenceMode guard;
    // The recipe fixes the numerics: no autocast on top (the runtime's plan may have turned it
    // on for this thread; a cast per call is also what made bf16 slower than fp32).
    compat::AutocastGuard no_autocast(device_.type(), false, compat::autocast_dtype(device_.type()));
    std::vector<c10::IValue> args;
    args.reserve(inputs.size());
    for (const at::Tensor& x : inputs) args.emplace_back(adapt(x));
    std::vector<at::Tensor> out = flatten_outputs(module_.forward(args));
    for (at::Tensor& y : out)
      if (y.is_floating_point() && (y.scalar_type() != at::kFloat || !y.is_contiguous()))
        y = y.to(at::kFloat).contiguous();
    return out;
  }
  const InferenceDecision& decision() const noexcept override { return decision_; }
  InferenceDecision& decision() noexcept { return decision_; }

 private:
  at::Tensor adapt(const at::Tensor& x) const {
    at::Tensor t = x.device() == device_ ? x : x.to(device_);
    if (t.is_floating_point() && t.scalar_type() != recipe_.dtype) t = t.to(recipe_.dtype);
    if (recipe_.channels_last && t.dim() == 4) t = t.contiguous(at::MemoryFormat::ChannelsLast);
    return t;
  }
  torch::jit::Module module_;
  Recipe recipe_;
  c10::Device device_;
  InferenceDecision decision_;
};

// The module prepared by `r` on `device`. Throws what LibTorch throws when it cannot be.
std::unique_ptr<Prepared> prepare_recipe(const torch::jit::Module& source, const Recipe& r, c10::Device device) {
  torch::jit::Module m = source.deepcopy();  // clone() would share the tensors: to() would change the caller's
  m.eval();
  m.to(device);
  if (r.dtype != at::kFloat) m.to(r.dtype);
  if (r.channels_last) {
    at::NoGradGuard no_grad;
    for (at::Tensor p : m.parameters())
      if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
  }
  if (r.freeze) m = torch::jit::freeze(m);
  // A channels-last activation flattened by `x.view(-1, n)` (pytorch/examples' MNIST network)
  // makes view fail: views whose result nothing modifies in place become reshape.
  const int reshaped = r.freeze && r.channels_last ? jit_walk::views_to_reshapes(m.get_method("forward").graph()->block()) : 0;
  if (r.optimize) m = torch::jit::optimize_for_inference(m);
  InferenceDecision d;
  d.chosen = r.name;
  d.description = r.description;
  if (reshaped > 0) d.description += "; " + std::to_string(reshaped) + " view" + (reshaped == 1 ? "" : "s") + " made reshape";
  return std::make_unique<Prepared>(std::move(m), r, device, std::move(d));
}

double median_ms(Prepared& p, const std::vector<at::Tensor>& inputs, c10::Device device, int warmup, int reps) {
  return stats::median_run_ms([&] { p.run(inputs); }, warmup, reps, [&] { detail::synchronize(device); });
}

// The module's code and parameter shapes, and the inputs': what a cached decision is for.
std::string model_signature(const torch::jit::Module& m, const std::vector<at::Tensor>& inputs) {
  std::ostringstream s;
  for (const auto& method : m.get_methods()) s << method.name() << ':' << *method.graph() << ';';
  for (const auto& p : m.named_parameters()) s << p.name << ' ' << p.value.sizes() << ' ' << p.value.scalar_type() << ';';
  std::ostringstream out;
  out << "inputs";
  for (const auto& x : inputs) out << ' ' << x.sizes() << ' ' << x.scalar_type();
  out << "; #" << autotune_detail::hash_hex(s.str());
  return out.str();
}

std::string fmt3(double v) {
  std::ostringstream s;
  s.precision(3);
  s << v;
  return s.str();
}

}  // namespace

std::unique_ptr<OptimizedModule> Runtime::optimize_for_inference(const torch::jit::Module& module,
                                                                 const std::vector<at::Tensor>& inputs,
                                                                 const InferenceOptions& o) {
  if (inputs.empty()) throw std::invalid_argument("optimize_for_inference: no example inputs");
  const DeviceInfo& info = device_->info();
  const bool bf16 = info.capabilities.has(Capability::bf16);
  const bool four_d = std::any_of(inputs.begin(), inputs.end(), [](const at::Tensor& x) { return x.dim() == 4; });
  auto allowed = [&](const Recipe& r, std::string& why) {
    if (std::find(o.exclude.begin(), o.exclude.end(), r.name) != o.exclude.end()) why = "excluded by the caller";
    else if (r.dtype == at::kBFloat16 && !bf16) why = info.id + " has no native bf16";
    else if (r.channels_last && !four_d) why = "no 4-D input";
    else if (r.optimize && !torch_device_.is_cpu()) why = "optimize_for_inference targets the CPU";
    return why.empty();
  };
  // The model runs in its own fp32 plan: no autocast (the recipes say the dtype).
  compat::AutocastGuard no_autocast(torch_device_.type(), false, compat::autocast_dtype(torch_device_.type()));

  // The candidates are part of the key: a decision made among fewer does not stand for more.
  std::string candidates = "candidates";
  for (const Recipe& r : recipes()) candidates += std::string(" ") + r.name;
  const std::string key_text = autotune_device_fingerprint(*context_) + "\n" + model_signature(module, inputs) + "\n" +
                               autotune_versions(*context_) + "\n" + candidates;
  const std::string key = autotune_detail::hash_hex(key_text);
  const bool use_cache = o.use_cache && *context_->config().autotune_cache;
  const std::string dir = use_cache ? autotune_cache_dir() : std::string();
  const std::string file = dir.empty() ? std::string() : (fs::path(dir) / "inference" / (key + ".json")).string();
  if (!file.empty()) {
    std::ifstream in(file);
    if (in) {
      try {
        const auto j = nlohmann::json::parse(in);
        const std::string chosen = j.at("chosen").get<std::string>();
        if (j.at("key_text").get<std::string>() == key_text)
          for (const Recipe& r : recipes()) {
            std::string why;
            if (r.name != chosen || !allowed(r, why)) continue;
            auto p = prepare_recipe(module, r, torch_device_);
            p->decision().origin = "cache";
            p->decision().cache_file = file;
            p->decision().why = j.at("why").get<std::string>();
            return p;
          }
      } catch (const std::exception& e) {
        spdlog::warn("optimize_for_inference: ignoring the cache entry {}: {}; measuring again", file,
                     text::shorten(e.what(), 120));
      }
    }
  }

  // The reference: the module's own outputs, fp32, no autograd.
  std::vector<at::Tensor> reference;
  try {
    torch::jit::Module m = module.deepcopy();
    m.eval();
    m.to(torch_device_);
    c10::InferenceMode guard;
    std::vector<c10::IValue> args;
    for (const auto& x : inputs) args.emplace_back(x.to(torch_device_));
    for (const auto& y : flatten_outputs(m.forward(args))) reference.push_back(y.to(at::kCPU, at::kDouble).clone());
  } catch (const std::exception& e) {  // c10::Error, or the TorchScript interpreter's error
    std::string shapes;
    for (const auto& x : inputs) {
      std::ostringstream s;
      s << x.sizes();
      shapes += (shapes.empty() ? "" : ", ") + s.str();
    }
    throw std::invalid_argument("optimize_for_inference: the module refuses the example inputs (" + shapes +
                                "): " + text::torch_error_line(e.what()));
  }

  InferenceDecision d;
  d.origin = "benchmark";
  const std::optional<CpuSample> load_start = sample_cpu();
  std::unique_ptr<Prepared> best;
  double best_ms = 0;
  const int total = static_cast<int>(recipes().size());
  for (int i = 0; i < total; ++i) {
    const Recipe& r = recipes()[static_cast<std::size_t>(i)];
    if (o.progress) o.progress(i, total, r.name);
    InferenceTrial t;
    t.candidate = r.name;
    t.description = r.description;
    if (!allowed(r, t.note)) {
      d.trials.push_back(std::move(t));
      continue;
    }
    try {
      auto p = prepare_recipe(module, r, torch_device_);
      t.description = p->decision().description;
      const OutputError e = compare_outputs(p->run(inputs), reference);
      t.rel_error = e.rel_error;
      t.cosine = e.cosine;
      t.median_ms = median_ms(*p, inputs, torch_device_, o.warmup, o.reps);
      const bool reduced = r.dtype != at::kFloat;
      t.accepted = reduced ? t.cosine >= o.min_cosine && t.rel_error <= o.bf16_tolerance : t.rel_error <= o.fp32_tolerance;
      if (!t.accepted)
        t.note = "outputs off: relative error " + fmt3(t.rel_error) + ", cosine " + fmt3(t.cosine) + " (needs " +
                 (reduced ? ">= " + fmt3(o.min_cosine) + " and <= " + fmt3(o.bf16_tolerance)
                          : "<= " + fmt3(o.fp32_tolerance)) + ")";
      if (t.accepted && (!best || t.median_ms < best_ms)) {
        best = std::move(p);
        best_ms = t.median_ms;
      }
      d.trials.push_back(std::move(t));
    } catch (const std::exception& e) {
      const std::string what = e.what();
      t.note = "failed: " + text::torch_error_line(what, 200);
      d.trials.push_back(std::move(t));
    }
  }
  if (!best) {
    std::string why;
    for (const auto& t : d.trials)
      if (t.note != "excluded by the caller") why += "; " + t.candidate + ": " + t.note;
    throw std::runtime_error("optimize_for_inference: no candidate ran within tolerance" + text::shorten(why, 400));
  }
  const InferenceTrial& chosen = *std::find_if(d.trials.begin(), d.trials.end(),
                                               [&](const InferenceTrial& x) { return x.candidate == best->decision().chosen; });
  const InferenceTrial& as_is = d.trials.front();
  for (auto& t : d.trials)
    if (t.accepted) t.note = &t == &chosen ? "fastest accepted" : fmt3(t.median_ms / chosen.median_ms) + "x the fastest's time";
  d.chosen = chosen.candidate;
  d.description = chosen.description;
  d.why = "fastest of the candidates within tolerance on the example inputs: " + fmt3(chosen.median_ms) +
          " ms per run vs " + fmt3(as_is.median_ms) + " ms as loaded; relative error " + fmt3(chosen.rel_error) +
          ", cosine " + fmt3(chosen.cosine);
  // A choice timed while other processes took the cores it needed is this call's, not the cache's.
  const std::string contention =
      torch_device_.is_cpu() ? contention_since(load_start, at::get_num_threads()) : std::string();
  if (!file.empty() && !contention.empty()) {
    d.why += "; not cached: while the candidates were timed, " + contention + ", so the next call times them again";
    spdlog::warn("optimize_for_inference: {}", d.why);
  } else if (!file.empty()) {
    try {
      fs::create_directories(fs::path(file).parent_path());
      const nlohmann::json j = {{"key_text", key_text}, {"chosen", d.chosen}, {"why", d.why},
                                {"created", autotune_detail::utc_now()}};
      write_file_atomically(file, j.dump(2) + "\n");
      d.cache_file = file;
    } catch (const std::exception& e) {
      spdlog::warn("optimize_for_inference: cannot write the cache entry {}: {}", file, e.what());
    }
  }
  best->decision() = std::move(d);
  return best;
}

void Runtime::prepare(torch::jit::Module& module) const { module.to(torch_device_); }

}  // namespace accelkit
