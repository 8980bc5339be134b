// accelkit bench --model FILE --input ... [--mode infer]: the user's model, one forward without
// autograd, timed in one process, alternating every round. A TorchScript file, three ways:
//   baseline  plain LibTorch: the module as loaded, eval, NoGradGuard, LibTorch's default
//             threads, fp32;
//   accelkit  Runtime::optimize_for_inference under the negotiated plan (threads): the
//             fastest of its candidates within tolerance, measured on these inputs;
//   int8      (quantize = int8) Runtime::quantize's module: dynamic INT8 Linear, fp32
//             elsewhere; (quantize = int8-static) static INT8 convolutions and Linear layers,
//             calibrated on the bench's inputs; the accelkit plan's threads; its output error
//             is shown, not judged;
//   tuned     (vs_tuned) hand-tuned LibTorch: all physical cores, the module frozen, channels-
//             last for 4-D inputs, fp32 - on an accelerator with bf16, under bf16 autocast.
// A .pt2 AOTInductor package (LibTorch >= 2.6; its kernels and dtypes fixed when it was
// compiled, so autocast, int8, freezing and channels-last do not apply: BenchResult::not_timed
// says so):
//   baseline  plain LibTorch: the package run by LibTorch's AOTIModelPackageLoader as its
//             documentation shows (InferenceMode), LibTorch's default threads;
//   accelkit  accelkit::load_model (the package checked against this device and LibTorch first)
//             under the negotiated plan (threads; TF32 on a GPU);
//   tuned     (vs_tuned) the package's loader on all physical cores.
// Before timing, the other variants' outputs are compared with the baseline's (relative error
// and cosine similarity; the tolerance follows the precision the variants run in).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <sstream>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/api/module.h>

#include "accelkit/loader.hpp"
#include "accelkit/model_file.hpp"
#include "accelkit/sdk/torch_compat_aoti.hpp"
#include "bench_common.hpp"

namespace accelkit::bench_detail {

void check_model_file(const BenchOptions& o) {
  ModelFileFacts facts;
  try {
    facts = inspect_model_file(o.model);
  } catch (const ModelFileError& e) {
    throw std::invalid_argument(std::string("bench: ") + e.what());
  }
  if (facts.format != ModelFormat::aoti_package) return;
  if (!compat::AotiPackage::available)
    throw std::invalid_argument("bench: " + o.model + ": a .pt2 package (AOTInductor) needs LibTorch >= 2.6; this "
                                "accelkit is built against LibTorch " + host_torch_version() +
                                ": bench a TorchScript file (torch.jit.save) instead");
  if (bench_mode(o) == "train")
    throw std::invalid_argument("bench: " + o.model + " is a .pt2 package: it has no backward (AOTInductor compiles "
                                "the forward only), so --mode train needs a TorchScript file; --mode infer times it");
}

namespace {

std::string input_list(const BenchOptions& o) {
  std::string out;
  for (const auto& in : o.inputs) out += (out.empty() ? "--input " : " --input ") + in;
  return out;
}

[[noreturn]] void refused(const BenchOptions& o, const std::exception& e) {
  throw std::invalid_argument("bench: " + o.model + " refuses " + input_list(o) + ": " + torch_error_summary(e.what()));
}

BenchVariant variant_info(const std::string& name, const std::string& description, int threads, const char* dtype) {
  BenchVariant v;
  v.name = name;
  v.description = description;
  v.threads = threads;
  v.dtype = dtype;
  v.optimizer = "-";
  v.step_mode = "inference";
  return v;
}

// What the process writes to stderr while it lives, held back: AOTInductor's runtime prints
// "Error: <reason>" there itself before LibTorch throws the same reason, and a refusal is one
// line. replay() writes what was held to stderr (the run went well: its warnings are the user's).
class HeldStderr {
 public:
  HeldStderr() {
    std::fflush(stderr);
    file_ = std::tmpfile();
    saved_ = file_ ? ::dup(STDERR_FILENO) : -1;
    if (saved_ >= 0) ::dup2(::fileno(file_), STDERR_FILENO);
  }
  ~HeldStderr() {
    restore();
    if (file_) std::fclose(file_);
  }
  HeldStderr(const HeldStderr&) = delete;
  HeldStderr& operator=(const HeldStderr&) = delete;

  void replay() {
    restore();
    if (!file_) return;
    std::rewind(file_);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) std::fwrite(buf, 1, n, stderr);
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  std::FILE* file_ = nullptr;
  int saved_ = -1;
};

// One way of running the model, with its plan.
struct Variant {
  BenchVariant info;
  PrecisionPlan plan;
  std::function<std::vector<at::Tensor>()> run;
  std::vector<double> samples;
};

// The hand-tuned variant's run: a frozen copy of `module` and the inputs; with channels_last,
// its 4-D weights and the 4-D inputs in channels-last layout.
std::function<std::vector<at::Tensor>()> frozen_run(const torch::jit::Module& module,
                                                    const std::vector<at::Tensor>& inputs, bool channels_last) {
  auto tuned = std::make_shared<torch::jit::Module>(module.deepcopy());
  if (channels_last) {
    at::NoGradGuard no_grad;
    for (at::Tensor p : tuned->parameters())
      if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
  }
  *tuned = torch::jit::freeze(*tuned);
  std::vector<c10::IValue> tuned_args;
  for (const auto& x : inputs)
    tuned_args.emplace_back(channels_last && x.dim() == 4 ? x.contiguous(at::MemoryFormat::ChannelsLast) : x);
  return std::function<std::vector<at::Tensor>()>([tuned, tuned_args] {
    at::NoGradGuard no_grad;
    return flatten_outputs(tuned->forward(tuned_args));
  });
}

// `accelkit bench --model FILE` in inference mode: the variants made from the loaded module,
// their outputs checked against the baseline's, then timed. run() calls the phases in order;
// each member below does one of them.
class InferBench {
 public:
  InferBench(Runtime& runtime, const BenchOptions& options, const BenchProgressFn& progress_fn)
      : rt(runtime), o(options), progress(progress_fn), device(rt.device()) {}

  BenchResult run() {
    start_result();
    make_inputs();
    if (package) {
      load_package();
      plans.emplace(rt);
      add_package_variants();
    } else {
      load_module();
      plans.emplace(rt);
      add_baseline();
      add_accelkit();
      if (!o.quantize.empty()) add_int8();
      if (o.vs_tuned) add_tuned();
    }
    // Accuracy: every variant's outputs against the baseline's, before anything is timed.
    set_tolerance();
    check_outputs();
    time_variants();
    if (!o.trace.empty()) trace_accelkit();
    summarize();
    return std::move(r);
  }

 private:
  void start_result() {
    r.mode = "infer";
    begin_result(r, rt, o, o.model, progress);
    spec = make_spec("file", 0, 0, !device.is_cpu());
    spec.file = o.model;
    for (const auto& in : o.inputs) spec.inputs.push_back(parse_input(in));
    r.shape = describe(spec);
    package = inspect_model_file(o.model).format == ModelFormat::aoti_package;  // check_model_file read it
  }

  // The inputs, seeded.
  void make_inputs() {
    at::manual_seed(o.seed + 1);
    for (const auto& in : spec.inputs) inputs.push_back(make_tensor(in, device));
  }

  // The module as loaded, in eval mode.
  void load_module() {
    args.assign(inputs.begin(), inputs.end());
    try {
      module = load_torchscript(o.model, device);
    } catch (const ModelFileError& e) {
      throw std::invalid_argument(std::string("bench: ") + e.what());
    }
    module.eval();
    for (const at::Tensor& p : module.parameters()) r.params += p.numel();
    // fp32 whatever the negotiated plan set on this thread: plain LibTorch has no autocast.
    fp32.emplace(device.type(), false, compat::autocast_dtype(device.type()));
  }

  // The baseline: the module as loaded; its outputs are the reference of the accuracy check.
  void add_baseline() {
    const int baseline_threads = o.baseline_threads > 0 ? o.baseline_threads : at::intraop_default_num_threads();
    auto plain = [this] {
      at::NoGradGuard no_grad;
      return flatten_outputs(module.forward(args));
    };
    variants.push_back({variant_info("baseline", "plain LibTorch: the module as loaded, no autograd, default threads, fp32",
                                      baseline_threads, "fp32"),
                        plain_plan(baseline_threads), plain, {}});
    plans->to("baseline", variants.back().plan);
    try {
      reference = plain();
    } catch (const std::exception& e) {
      refused(o, e);
    }
  }

  void add_accelkit() {
    report(progress, o.model, "optimize", 0, 1);
    plans->to("accelkit", rt.precision());
    InferenceOptions io;
    io.progress = [&](int done, int total, const std::string&) { report(progress, o.model, "optimize", done, total); };
    std::shared_ptr<OptimizedModule> fast = accelkit::optimize_for_inference(rt, module, inputs, io);
    r.inference = fast->decision();
    reduced = r.inference->chosen.rfind("bf16", 0) == 0;
    accel_threads = rt.precision().threads > 0 ? rt.precision().threads : at::get_num_threads();
    variants.push_back({variant_info("accelkit", "accelkit: Runtime::optimize_for_inference - " + r.inference->description,
                                      accel_threads, reduced ? "bf16" : "fp32"),
                        rt.precision(), [fast, fast_inputs = inputs] { return fast->run(fast_inputs); }, {}});
  }

  void add_int8() {
    report(progress, o.model, "quantize", 0, 1);
    QuantizeOptions qo;
    if (o.quantize == "int8-static") qo.conv = QuantDtype::int8;
    QuantizedModule q = accelkit::quantize(rt, module, qo, inputs);
    r.quantize = q.report;
    auto qm = std::make_shared<torch::jit::Module>(std::move(q.module));
    variants.push_back({variant_info("int8",
                                      "accelkit int8: Runtime::quantize - " +
                                          (qo.conv == QuantDtype::int8
                                               ? std::string("static int8 convolutions and Linear layers")
                                               : std::string("dynamic int8 Linear")) +
                                          " on LibTorch's " + r.quantize->engine + " engine (" +
                                          std::to_string(r.quantize->converted) + " layers), fp32 elsewhere",
                                      accel_threads, "int8"),
                        rt.precision(),
                        [qm, q_args = args, q_device = device] {
                          at::NoGradGuard no_grad;
                          compat::AutocastGuard off(q_device.type(), false, compat::autocast_dtype(q_device.type()));
                          return flatten_outputs(qm->forward(q_args));
                        },
                        {}});
  }

  void add_tuned() {
    // Frozen without autocast: the accelkit plan just turned it on for this thread, and
    // freezing would bake its casts into the graph.
    plans->to("tuned", plain_plan(physical_cores(rt)));
    const bool four_d = std::any_of(inputs.begin(), inputs.end(), [](const at::Tensor& x) { return x.dim() == 4; });
    // Channels-last where the inputs are images, as a careful user would try it - and drop it,
    // as they would, when the model refuses it (a .view() on the activations does).
    std::string layout = four_d ? ", channels-last" : "";
    std::function<std::vector<at::Tensor>()> tuned_run = frozen_run(module, inputs, four_d);
    if (four_d) {
      try {
        tuned_run();
      } catch (const std::exception& e) {
        layout = " (channels-last refused by the model: " + torch_error_summary(e.what()).substr(0, 160) + ")";
        tuned_run = frozen_run(module, inputs, false);
      }
    }
    // On an accelerator with bf16, a careful user also runs the frozen module under bf16 autocast
    // (the GPU's tensor cores); on a CPU fp32, as before.
    const bool bf16 = !device.is_cpu() && rt.device_handle()->info().capabilities.has(Capability::bf16) &&
                      compat::autocast_available(device.type());
    if (bf16)
      tuned_run = [inner = tuned_run, type = device.type()] {
        compat::AutocastGuard on(type, true, at::kBFloat16);
        return inner();
      };
    variants.push_back({variant_info("tuned",
                                     std::string("hand-tuned LibTorch: frozen, ") +
                                         (bf16 ? "bf16 autocast" : "all physical cores, fp32") + layout,
                                     physical_cores(rt), bf16 ? "bf16" : "fp32"),
                        plain_plan(physical_cores(rt)), tuned_run, {}});
  }

  // A .pt2 package: accelkit's load_model first (it checks the package against this device and
  // LibTorch and refuses with the reason), then LibTorch's own loader for the plain variants.
  void load_package() {
    try {
      accel_model = load_model(rt, o.model);
    } catch (const ModelFileError& e) {
      throw std::invalid_argument(std::string("bench: ") + e.what());
    }
    const ModelFileFacts& f = accel_model->facts();
    const std::string name = f.models.size() == 1 ? f.models.front() : "model";
    try {
      plain_package = std::make_shared<compat::AotiPackage>(o.model, name, device.has_index() ? device.index() : -1);
    } catch (const std::exception& e) {
      throw std::invalid_argument("bench: " + o.model + ": LibTorch's AOTIModelPackageLoader cannot load it: " +
                                  torch_error_summary(e.what()));
    }
    r.params = std::max<std::int64_t>(0, plain_package->constant_elements());
    r.shape = ".pt2 package '" + name + "' (" + f.device + (f.cpu_isa.empty() ? "" : ", " + f.cpu_isa) +
              (f.torch_version.empty() ? "" : ", PyTorch " + f.torch_version) + "), inputs";
    for (const auto& in : spec.inputs) r.shape += " " + in.text;
    // The package computes in the dtypes it was compiled with: no variant runs under autocast.
    fp32.emplace(device.type(), false, compat::autocast_dtype(device.type()));
  }

  // The package's variants: LibTorch's loader at its default threads (the reference) and on all
  // physical cores (vs_tuned), accelkit's load_model under the plan; what cannot apply, said.
  void add_package_variants() {
    const int baseline_threads = o.baseline_threads > 0 ? o.baseline_threads : at::intraop_default_num_threads();
    const c10::DeviceType type = device.type();
    auto plain = [p = plain_package, args = inputs, type] {
      c10::InferenceMode inference_mode;  // as LibTorch's documentation runs a package
      compat::AutocastGuard off(type, false, compat::autocast_dtype(type));
      return p->run(args);
    };
    variants.push_back({variant_info("baseline",
                                     "plain LibTorch: the package run by AOTIModelPackageLoader as LibTorch's "
                                     "documentation shows (InferenceMode), default threads",
                                     baseline_threads, "compiled"),
                        plain_plan(baseline_threads), plain, {}});
    plans->to("baseline", variants.back().plan);
    try {
      HeldStderr held;
      reference = plain();
      held.replay();
    } catch (const std::exception& e) {
      refused(o, e);
    }
    plans->to("accelkit", rt.precision());
    accel_threads = rt.precision().threads > 0 ? rt.precision().threads : at::get_num_threads();
    const bool tf32 = rt.precision().tf32;
    auto ours = [m = accel_model, args = inputs, type] {
      compat::AutocastGuard off(type, false, compat::autocast_dtype(type));
      return m->run(args);
    };
    variants.push_back({variant_info("accelkit",
                                     "accelkit: load_model under the negotiated plan (" + std::to_string(accel_threads) +
                                         " threads" + (tf32 ? ", TF32" : "") +
                                         "); the package's kernels and dtypes as compiled",
                                     accel_threads, "compiled"),
                        rt.precision(), ours, {}});
    if (!o.quantize.empty())
      r.not_timed.push_back("int8 (--quantize " + o.quantize +
                            "): Runtime::quantize rewrites a TorchScript module's Linear and convolution layers; a "
                            ".pt2 package's kernels were compiled at export (quantize before torch.export)");
    if (!o.vs_tuned) return;
    variants.push_back({variant_info("tuned", "hand-tuned LibTorch: the package's AOTIModelPackageLoader on all "
                                              "physical cores",
                                     physical_cores(rt), "compiled"),
                        plain_plan(physical_cores(rt)), plain, {}});
    r.not_timed.push_back("tuned: freezing and channels-last - a .pt2 package's graph was compiled with its weights "
                          "as constants, in the layouts chosen at export");
  }

  // A package's variants run the same compiled kernels: only the order of sums differs (thread
  // count; TF32 where the plan turns it on).
  void set_package_tolerance() {
    BenchAccuracy& acc = r.accuracy;
    const bool tf32 = rt.precision().tf32;
    const bool low = std::any_of(reference.begin(), reference.end(), [](const at::Tensor& t) {
      return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
    });
    acc.tolerance = low ? 1e-2 : tf32 ? 5e-3 : 1e-4;
    acc.why = low ? "the package's outputs are bf16 or fp16 (unit roundoff up to 2^-9 ~ 2e-3): the same compiled "
                    "kernels in every variant, only the order of sums differs (thread count)"
              : tf32 ? "the same compiled kernels in every variant; accelkit's plan runs fp32 matmuls in TF32 (unit "
                       "roundoff 2^-11 ~ 5e-4 per product): 5e-3 = 10x that"
                     : "the same compiled kernels in every variant: only the order of floating-point sums differs "
                       "(thread count)";
  }

  // The tolerance follows the precision the chosen candidate runs in.
  void set_tolerance() {
    BenchAccuracy& acc = r.accuracy;
    acc.compared = "outputs";
    acc.steps = 1;
    if (package) return set_package_tolerance();
    // TF32 (a GPU's fp32 matmuls on tensor cores) keeps fp32's range with 10 mantissa bits.
    const bool tf32 = !reduced && rt.precision().tf32;
    acc.tolerance = reduced ? 5e-2 : tf32 ? 5e-3 : 1e-4;
    acc.why = reduced ? "accelkit runs the model in bf16 (8 significant bits, unit roundoff 2^-9 ~ 2e-3, through every "
                        "layer): the outputs must keep a cosine similarity >= 0.999 with fp32's and a relative error "
                        "<= 5e-2; a wrong kernel or cast moves them far more"
              : tf32 ? "accelkit's fp32 matmuls and convolutions run in TF32 (unit roundoff 2^-11 ~ 5e-4 per product, "
                       "sums in fp32): 5e-3 = 10x that; a wrong kernel or cast moves the outputs far more"
                     : "both fp32: only the order of floating-point sums differs (fused or folded kernels)";
  }

  std::vector<at::Tensor> run_variant(Variant& v) {
    enter_variant(*plans, v.info.name, v.plan, v.info.threads);
    return v.run();
  }

  // Each variant's outputs against the reference; BenchCheckError when accelkit's are off.
  void check_outputs() {
    BenchAccuracy& acc = r.accuracy;
    for (std::size_t i = 1; i < variants.size(); ++i) {
      report(progress, o.model, "check", static_cast<int>(i), static_cast<int>(variants.size()));
      const OutputError e = compare_outputs(run_variant(variants[i]), reference);
      const double rel = e.rel_error, cos = e.cosine;
      variants[i].info.rel_error = rel;
      variants[i].info.cosine = cos;
      if (variants[i].info.name == "accelkit") {
        acc.rel_diff = rel;
        acc.cosine = cos;
      } else if (variants[i].info.name == "tuned") {
        acc.tuned_rel_diff = rel;
      }
    }
    acc.ok = acc.rel_diff <= acc.tolerance && (!reduced || acc.cosine.value_or(0) >= 0.999);
    if (!acc.ok) {
      std::ostringstream msg;
      msg << "accuracy check: accelkit's outputs differ from the baseline's by " << acc.rel_diff
          << " relative, cosine " << acc.cosine.value_or(0) << " (tolerance " << acc.tolerance << ")";
      r.error = msg.str();
      r.baseline = variants[0].info;
      r.accelkit = variants[1].info;
      throw BenchCheckError(r.error, r);
    }
  }

  // Warm-up, then alternate in a fresh seeded order every round; then what else ran on the
  // machine meanwhile.
  void time_variants() {
    for (int w = 0; w < o.warmup; ++w) {
      report(progress, o.model, "warmup", w, o.warmup);
      for (Variant& v : variants) run_variant(v);
    }
    std::vector<std::size_t> order(variants.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::mt19937_64 rng(o.seed);
    const std::optional<CpuSample> timing_start = sample_cpu();
    for (int round = 0; round < o.steps; ++round) {
      report(progress, o.model, "timing", round, o.steps);
      std::shuffle(order.begin(), order.end(), rng);
      for (std::size_t i : order) {
        Variant& v = variants[i];
        // Untimed first where the thread count changed: the first run at a new count runs slow.
        if (enter_variant(*plans, v.info.name, v.plan, v.info.threads)) v.run();
        synchronize(device);
        const auto t0 = Clock::now();
        v.run();
        synchronize(device);
        v.samples.push_back(ms_since(t0));
      }
    }
    report(progress, o.model, "timing", o.steps, o.steps);
    int most_threads = 0;
    for (const Variant& v : variants) most_threads = std::max(most_threads, v.info.threads);
    machine_after(r.machine, timing_start, most_threads);
  }

  void trace_accelkit() {
    Variant& ours = variants[1];
    enter_variant(*plans, ours.info.name, ours.plan, ours.info.threads);
    trace_steps(r, o, device, [&ours] { ours.run(); });
  }

  // The variants' times and the speedups into the result.
  void summarize() {
    for (Variant& v : variants) {
      v.info.time = stats_of(v.samples);
      v.info.forward_ms = v.info.time.median_ms;
    }
    r.baseline = variants[0].info;
    r.accelkit = variants[1].info;
    for (const Variant& v : variants) {
      if (v.info.name == "tuned") r.tuned = v.info;
      if (v.info.name == "int8") r.int8 = v.info;
    }
    if (r.tuned) r.speedup_vs_tuned = r.tuned->time.median_ms / r.accelkit.time.median_ms;
    if (r.int8) r.speedup_int8 = r.baseline.time.median_ms / r.int8->time.median_ms;
    r.speedup = r.baseline.time.median_ms / r.accelkit.time.median_ms;
    r.speedup_min = r.baseline.time.min_ms / r.accelkit.time.min_ms;
    r.decisions = rt.context().decisions();
    r.load_after = load_average();
  }

  Runtime& rt;
  const BenchOptions& o;
  const BenchProgressFn& progress;
  const c10::Device device;
  BenchResult r;
  ModelSpec spec;
  std::vector<at::Tensor> inputs;
  bool package = false;  // a .pt2 package (else TorchScript)
  std::vector<c10::IValue> args;  // the inputs as the module's forward takes them
  torch::jit::Module module;
  std::shared_ptr<InferenceModel> accel_model;  // a package: accelkit's load_model
  std::shared_ptr<compat::AotiPackage> plain_package;  // a package: LibTorch's own loader
  std::optional<compat::AutocastGuard> fp32;  // from load_module() on
  std::optional<PlanSwitch> plans;
  std::vector<Variant> variants;  // baseline, accelkit, then int8 and tuned as asked
  std::vector<at::Tensor> reference;  // the baseline's outputs
  bool reduced = false;  // accelkit's chosen candidate runs in bf16
  int accel_threads = 0;
};

}  // namespace

at::Tensor forward_or_explain(const Net& net, const at::Tensor& x, const BenchOptions& o) {
  try {
    return net.forward(x);
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    refused(o, e);
  }
}

BenchResult run_infer_bench(Runtime& rt, const BenchOptions& o, const BenchProgressFn& progress) {
  return InferBench(rt, o, progress).run();
}

}  // namespace accelkit::bench_detail
