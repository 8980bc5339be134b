// optimize_for_inference: candidates, measurement, the choice, the cache.
#include "accelkit/inference.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "accelkit/atomic_file.hpp"
#include "accelkit/autotune.hpp"
#include "accelkit/device_sync.hpp"
#include "accelkit/machine_load.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/decision_cache.hpp"
#include "jit_walk.hpp"
#include "accelkit/base/median.hpp"
#include "accelkit/base/strings.hpp"

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
  out << "; #" << decision_cache::hash_hex(s.str());
  return out.str();
}

std::string fmt3(double v) {
  std::ostringstream s;
  s.precision(3);
  s << v;
  return s.str();
}

// Which recipes the device, the inputs and the caller allow.
class RecipeFilter {
 public:
  RecipeFilter(const Runtime& rt, const std::vector<at::Tensor>& inputs, const std::vector<std::string>& exclude)
      : exclude_(exclude),
        device_id_(rt.device_handle()->info().id),
        bf16_(rt.device_handle()->info().capabilities.has(Capability::bf16)),
        four_d_(std::any_of(inputs.begin(), inputs.end(), [](const at::Tensor& x) { return x.dim() == 4; })),
        cpu_(rt.device().is_cpu()) {}

  // Why `r` is not a candidate here; empty when it is one.
  std::string refusal(const Recipe& r) const {
    if (std::find(exclude_.begin(), exclude_.end(), r.name) != exclude_.end()) return "excluded by the caller";
    if (r.dtype == at::kBFloat16 && !bf16_) return device_id_ + " has no native bf16";
    if (r.channels_last && !four_d_) return "no 4-D input";
    if (r.optimize && !cpu_) return "optimize_for_inference targets the CPU";
    return {};
  }

 private:
  const std::vector<std::string>& exclude_;
  std::string device_id_;
  bool bf16_;
  bool four_d_;
  bool cpu_;
};

// Where a decision for this device, model and inputs is cached: the text it is keyed by, and
// its file ("" when the cache is off).
struct CacheSlot {
  std::string key_text;
  std::string file;
};

CacheSlot cache_slot(const Runtime& rt, const torch::jit::Module& module, const std::vector<at::Tensor>& inputs,
                     bool use_cache) {
  // The candidates are part of the key: a decision made among fewer does not stand for more.
  std::string candidates = "candidates";
  for (const Recipe& r : recipes()) candidates += std::string(" ") + r.name;
  CacheSlot slot;
  slot.key_text = autotune_device_fingerprint(rt.context()) + "\n" + model_signature(module, inputs) + "\n" +
                  autotune_versions(rt.context()) + "\n" + candidates;
  const std::string key = decision_cache::hash_hex(slot.key_text);
  const std::string dir = use_cache && *rt.context().config().autotune_cache ? decision_cache_dir() : std::string();
  if (!dir.empty()) slot.file = (fs::path(dir) / "inference" / (key + ".json")).string();
  return slot;
}

// The cached choice prepared, or null when there is none for this key, it is no longer
// allowed, or the entry cannot be read or prepared (then measured again).
std::unique_ptr<Prepared> from_cache(const CacheSlot& slot, const torch::jit::Module& module,
                                     const RecipeFilter& filter, c10::Device device) {
  if (slot.file.empty()) return nullptr;
  std::string problem;
  const std::optional<std::string> text = decision_cache::read_entry_text(slot.file, &problem);
  if (!text) {
    if (!problem.empty())
      spdlog::warn("optimize_for_inference: ignoring the cache entry {}: {}; measuring again", slot.file, problem);
    return nullptr;
  }
  try {
    const auto j = nlohmann::json::parse(*text);
    const std::string chosen = j.at("chosen").get<std::string>();
    if (j.at("key_text").get<std::string>() != slot.key_text) return nullptr;
    for (const Recipe& r : recipes()) {
      if (r.name != chosen || !filter.refusal(r).empty()) continue;
      auto p = prepare_recipe(module, r, device);
      p->decision().origin = "cache";
      p->decision().cache_file = slot.file;
      p->decision().why = j.at("why").get<std::string>();
      return p;
    }
  } catch (const std::exception& e) {
    spdlog::warn("optimize_for_inference: ignoring the cache entry {}: {}; measuring again", slot.file,
                 text::shorten(e.what(), 120));
  }
  return nullptr;
}

// The reference: the module's own outputs, fp32, no autograd, in double on the CPU.
std::vector<at::Tensor> reference_outputs(const torch::jit::Module& module, const std::vector<at::Tensor>& inputs,
                                          c10::Device device) {
  std::vector<at::Tensor> reference;
  try {
    torch::jit::Module m = module.deepcopy();
    m.eval();
    m.to(device);
    c10::InferenceMode guard;
    std::vector<c10::IValue> args;
    for (const auto& x : inputs) args.emplace_back(x.to(device));
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
  return reference;
}

// Accepts the measured trial `t` of `r` when its outputs are close enough to the reference's,
// and otherwise says by how much they are off.
void judge_trial(InferenceTrial& t, const Recipe& r, const InferenceOptions& o, bool tf32) {
  const bool reduced = r.dtype != at::kFloat;
  const double fp32 = fp32_candidate_tolerance(o, tf32);
  t.accepted = reduced ? t.cosine >= o.min_cosine && t.rel_error <= o.bf16_tolerance : t.rel_error <= fp32;
  if (!t.accepted)
    t.note = "outputs off: relative error " + fmt3(t.rel_error) + ", cosine " + fmt3(t.cosine) + " (needs " +
             (reduced ? ">= " + fmt3(o.min_cosine) + " and <= " + fmt3(o.bf16_tolerance)
                      : "<= " + fmt3(fp32) + (tf32 ? ", TF32" : "")) + ")";
}

// Every candidate's trial, and the fastest accepted one prepared.
struct Measured {
  InferenceDecision decision;
  std::unique_ptr<Prepared> best;
};

Measured measure_candidates(const torch::jit::Module& module, const std::vector<at::Tensor>& inputs,
                            const std::vector<at::Tensor>& reference, const RecipeFilter& filter,
                            const InferenceOptions& o, c10::Device device, bool tf32) {
  Measured m;
  m.decision.origin = "benchmark";
  double best_ms = 0;
  const int total = static_cast<int>(recipes().size());
  for (int i = 0; i < total; ++i) {
    const Recipe& r = recipes()[static_cast<std::size_t>(i)];
    if (o.progress) o.progress(i, total, r.name);
    InferenceTrial t;
    t.candidate = r.name;
    t.description = r.description;
    t.note = filter.refusal(r);
    if (!t.note.empty()) {
      m.decision.trials.push_back(std::move(t));
      continue;
    }
    try {
      auto p = prepare_recipe(module, r, device);
      t.description = p->decision().description;
      const OutputError e = compare_outputs(p->run(inputs), reference);
      t.rel_error = e.rel_error;
      t.cosine = e.cosine;
      t.median_ms = median_ms(*p, inputs, device, o.warmup, o.reps);
      judge_trial(t, r, o, tf32);
      if (t.accepted && (!m.best || t.median_ms < best_ms)) {
        m.best = std::move(p);
        best_ms = t.median_ms;
      }
    } catch (const std::exception& e) {
      const std::string what = e.what();
      t.note = "failed: " + text::torch_error_line(what, 200);
    }
    m.decision.trials.push_back(std::move(t));
  }
  if (!m.best) {
    std::string why;
    for (const auto& t : m.decision.trials)
      if (t.note != "excluded by the caller") why += "; " + t.candidate + ": " + t.note;
    throw std::runtime_error("optimize_for_inference: no candidate ran within tolerance" + text::shorten(why, 400));
  }
  return m;
}

// The decision for the candidate `chosen_name`: each accepted trial's time against it, and
// the line that says why it was chosen.
void explain_choice(InferenceDecision& d, const std::string& chosen_name) {
  const InferenceTrial& chosen = *std::find_if(d.trials.begin(), d.trials.end(),
                                               [&](const InferenceTrial& x) { return x.candidate == chosen_name; });
  const InferenceTrial& as_is = d.trials.front();
  for (auto& t : d.trials)
    if (t.accepted) t.note = &t == &chosen ? "fastest accepted" : fmt3(t.median_ms / chosen.median_ms) + "x the fastest's time";
  d.chosen = chosen.candidate;
  d.description = chosen.description;
  d.why = "fastest of the candidates within tolerance on the example inputs: " + fmt3(chosen.median_ms) +
          " ms per run vs " + fmt3(as_is.median_ms) + " ms as loaded; relative error " + fmt3(chosen.rel_error) +
          ", cosine " + fmt3(chosen.cosine);
}

// Writes the decision to its cache file, unless the cache is off or the timing was contended.
void cache_decision(InferenceDecision& d, const CacheSlot& slot, const std::optional<CpuSample>& load_start,
                    c10::Device device) {
  if (slot.file.empty()) return;
  // A choice timed while other processes took the cores it needed is this call's, not the cache's.
  const std::string contention = device.is_cpu() ? contention_since(load_start, at::get_num_threads()) : std::string();
  if (!contention.empty()) {
    d.why += "; not cached: while the candidates were timed, " + contention + ", so the next call times them again";
    spdlog::warn("optimize_for_inference: {}", d.why);
    return;
  }
  try {
    fs::create_directories(fs::path(slot.file).parent_path());
    const nlohmann::json j = {{"key_text", slot.key_text}, {"chosen", d.chosen}, {"why", d.why},
                              {"created", decision_cache::utc_now()}};
    write_file_atomically(slot.file, j.dump(2) + "\n");
    d.cache_file = slot.file;
  } catch (const std::exception& e) {
    spdlog::warn("optimize_for_inference: cannot write the cache entry {}: {}", slot.file, e.what());
  }
}

}  // namespace

double fp32_candidate_tolerance(const InferenceOptions& o, bool tf32) {
  return tf32 ? std::max(o.fp32_tolerance, o.tf32_tolerance) : o.fp32_tolerance;
}

std::unique_ptr<OptimizedModule> optimize_for_inference(Runtime& rt, const torch::jit::Module& module,
                                                        const std::vector<at::Tensor>& inputs,
                                                        const InferenceOptions& o) {
  if (inputs.empty()) throw std::invalid_argument("optimize_for_inference: no example inputs");
  const RecipeFilter filter(rt, inputs, o.exclude);
  // The model runs in its own fp32 plan: no autocast (the recipes say the dtype).
  compat::AutocastGuard no_autocast(rt.device().type(), false, compat::autocast_dtype(rt.device().type()));
  const CacheSlot slot = cache_slot(rt, module, inputs, o.use_cache);
  if (std::unique_ptr<Prepared> cached = from_cache(slot, module, filter, rt.device())) return cached;

  const std::vector<at::Tensor> reference = reference_outputs(module, inputs, rt.device());
  const std::optional<CpuSample> load_start = sample_cpu();
  Measured m = measure_candidates(module, inputs, reference, filter, o, rt.device(), rt.precision().tf32);
  explain_choice(m.decision, m.best->decision().chosen);
  cache_decision(m.decision, slot, load_start, rt.device());
  m.best->decision() = std::move(m.decision);
  return std::move(m.best);
}


}  // namespace accelkit
