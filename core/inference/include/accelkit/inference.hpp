// The user's own TorchScript model, made fast for inference on the runtime's device - by
// measurement, never by assumption:
//
//   torch::jit::Module m = accelkit::load_torchscript("model.pt");  // model_file.hpp
//   auto fast = accelkit::optimize_for_inference(*rt, m, {torch::randn({16, 3, 224, 224})});
//   std::vector<at::Tensor> y = fast->run({x});        // fp32 in, fp32 out
//   std::cout << fast->decision().why;                 // what was applied, and the figures
//
// The candidates (the ones this device and model allow): the module as it is (eval, no
// autograd); frozen (torch::jit::freeze: weights become constants, conv-bn folded); frozen and
// optimize_for_inference (LibTorch's own pass: MKLDNN layouts and fusions); bf16 weights cast
// once (where the device computes bf16 natively; a cast per call - autocast - was measured
// slower); channels-last (for 4-D inputs); bf16 + channels-last; bf16 + channels-last +
// optimize_for_inference (oneDNN's bf16 convolutions). Each is timed on the example
// inputs, its outputs compared with the module's own fp32 outputs, and the fastest one within
// tolerance is kept. The decision is cached under the cache directory (inference/), keyed by
// the device, the model's code and parameter shapes, the input shapes and the versions.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/api/module.h>

namespace accelkit {

class Runtime;

struct InferenceOptions {
  int warmup = 2;   // untimed runs per candidate
  int reps = 5;     // timed runs per candidate (median)
  // Accepting a candidate: ||y - ref|| / ||ref|| over every output at most this for the fp32
  // candidates (only the order of floating-point sums may differ) ...
  double fp32_tolerance = 1e-4;
  // ... or this where the runtime's plan runs fp32 matmuls and convolutions in TF32 (a GPU's
  // tensor cores: unit roundoff 2^-11 per product; folding batch norms into the convolutions
  // changes which products are rounded) ...
  double tf32_tolerance = 5e-3;
  // ... and for reduced precision a cosine similarity with the fp32 outputs of at least this,
  // and a relative error of at most bf16_tolerance.
  double min_cosine = 0.999;
  double bf16_tolerance = 5e-2;
  bool use_cache = true;  // read and write the decision cache (the autotune_cache setting too)
  // Candidates to leave out, by name ("bf16", "channels_last", ...).
  std::vector<std::string> exclude;
  std::function<void(int done, int total, const std::string& candidate)> progress;
};

struct InferenceTrial {
  std::string candidate;    // "as_is", "frozen", "optimized", "channels_last", "bf16", "bf16_channels_last",
                            // "bf16_optimized"
  std::string description;  // "frozen (torch::jit::freeze), fp32"
  double median_ms = 0;     // per run of the example inputs
  double rel_error = 0;     // vs the module's own fp32 outputs
  double cosine = 1;
  bool accepted = false;
  std::string note;         // why not, or "fastest accepted"
};

struct InferenceDecision {
  std::string chosen;       // a candidate's name
  std::string description;  // what it applies
  std::string why;          // one line with the figures
  std::string origin;       // "benchmark" | "cache"
  std::string cache_file;   // read or written; "" without a cache
  std::vector<InferenceTrial> trials;  // empty when from the cache
};

// A module prepared one way: run() converts inputs as it needs (dtype, memory format) and
// gives floating-point outputs back as contiguous fp32, so the caller sees the module's own
// interface. Thread-safety: one run() at a time.
class OptimizedModule {
 public:
  virtual ~OptimizedModule() = default;
  virtual std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) = 0;
  virtual const InferenceDecision& decision() const noexcept = 0;
};

// The tolerance the fp32 candidates are held to: o.fp32_tolerance, or o.tf32_tolerance when the
// plan runs fp32 matmuls in TF32.
double fp32_candidate_tolerance(const InferenceOptions& o, bool tf32);

// Every tensor of a module's output (a tensor, or tuples/lists/dicts of them), in order.
std::vector<at::Tensor> flatten_outputs(const c10::IValue& output);

// How far outputs are from reference outputs, over all of them, in double. Outputs of another
// count or shape, non-finite values, or integer outputs that differ: infinite error, cosine 0.
struct OutputError {
  double rel_error = 0;      // ||got - ref|| / ||ref||
  double max_rel_error = 0;  // max |got - ref| / max |ref|
  double cosine = 1;         // cosine similarity of got with ref
};
OutputError compare_outputs(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& ref);

// The user's TorchScript module made fast for inference on `rt`'s device: candidates timed on
// `example_inputs` and checked against the module's own fp32 outputs; the fastest within
// tolerance is returned, its decision() saying what was applied and why. Cached.
std::unique_ptr<OptimizedModule> optimize_for_inference(Runtime& rt, const torch::jit::Module& module,
                                                        const std::vector<at::Tensor>& example_inputs,
                                                        const InferenceOptions& options = {});

}  // namespace accelkit
