// quantize with QuantizeOptions::conv = int8: static INT8 through LibTorch's
// graph-mode quantization passes (quantize.hpp says what they do).
#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/fold_conv_bn.h>
#include <torch/csrc/jit/passes/quantization/finalize.h>
#include <torch/csrc/jit/passes/quantization/insert_observers.h>
#include <torch/csrc/jit/passes/quantization/insert_quant_dequant.h>
#include <torch/csrc/jit/passes/quantization/quantization_type.h>

#include "accelkit/inference.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "jit_walk.hpp"
#include "quantize_support.hpp"
#include "accelkit/base/strings.hpp"

namespace accelkit::quant {

namespace {

// A min/max observer as LibTorch's InsertObservers expects one: a module whose forward
// records the range of what passes through it, with `dtype`, `qscheme` and `ch_axis`
// attributes and the method InsertQuantDeQuant calls for the scale and zero point
// (`calculate_qparams`; LibTorch 1.13 calls `get_qparams`, which adds the axis).
// Activations: quint8, one affine scale per tensor, the range widened to hold 0 (7 bits with
// `reduce_range`). Weights: qint8, symmetric, one scale per output channel (axis 0).
// Until a forward has run, `seen` is false (the value was never reached).
torch::jit::Module observer(bool per_channel, bool reduce_range) {
  torch::jit::Module m(per_channel ? "__torch__.accelkit.quant.PerChannelMinMaxObserver"
                                   : "__torch__.accelkit.quant.MinMaxObserver");
  const at::QScheme scheme = per_channel ? at::kPerChannelSymmetric : at::kPerTensorAffine;
  const at::ScalarType dtype = per_channel ? at::kQInt8 : at::kQUInt8;
  std::int64_t qmin = per_channel ? -128 : 0, qmax = per_channel ? 127 : 255;
  if (!per_channel && reduce_range) qmax = 127;
  m.register_attribute("dtype", c10::IntType::get(), static_cast<std::int64_t>(dtype));
  m.register_attribute("qscheme", c10::IntType::get(), static_cast<std::int64_t>(scheme));
  m.register_attribute("quant_min", c10::IntType::get(), qmin);
  m.register_attribute("quant_max", c10::IntType::get(), qmax);
  m.register_attribute("ch_axis", c10::IntType::get(), static_cast<std::int64_t>(0));
  m.register_attribute("seen", c10::BoolType::get(), false);
  m.register_attribute("min_val", c10::TensorType::get(), at::zeros({}));
  m.register_attribute("max_val", c10::TensorType::get(), at::zeros({}));
  // The range seen so far, widened by this value's (`lo`, `hi`: per tensor or per channel).
  const std::string record = R"(
    if self.seen:
        lo = torch.minimum(lo, self.min_val)
        hi = torch.maximum(hi, self.max_val)
    self.min_val = lo
    self.max_val = hi
    self.seen = True
    return x
)";
  if (per_channel) {
    m.define(R"(
def forward(self, x):
    v = x.detach().float().flatten(1)
    lo = torch.amin(v, 1)
    hi = torch.amax(v, 1))" + record + R"(
def calculate_qparams(self):
    amax = torch.maximum(self.min_val * -1.0, self.max_val)
    scale = torch.clamp(amax / (float(self.quant_max - self.quant_min) / 2.0), min=1.1920928955078125e-07)
    return scale, torch.zeros_like(scale).long()

def get_qparams(self):
    scale, zp = self.calculate_qparams()
    return scale, zp, self.ch_axis
)");
  } else {
    m.define(R"(
def forward(self, x):
    if x.numel() == 0:
        return x
    v = x.detach().float()
    lo = torch.min(v)
    hi = torch.max(v))" + record + R"(
def get_qparams(self):
    return self.calculate_qparams()

def calculate_qparams(self):
    lo = torch.clamp(self.min_val, max=0.0)
    hi = torch.clamp(self.max_val, min=0.0)
    scale = torch.clamp((hi - lo) / float(self.quant_max - self.quant_min), min=1.1920928955078125e-07)
    zp = torch.clamp(torch.round(lo / scale) * -1.0 + float(self.quant_min), min=float(self.quant_min),
                     max=float(self.quant_max))
    return scale, zp.long()
)");
  }
  return m;
}

// Whether `v` is computed from the module's attributes and constants alone (`self` is input
// 0 of a method's graph): the same for every input the module is given.
bool attribute_only(const torch::jit::Value* v) {
  const torch::jit::Node* n = v->node();
  if (n->kind() == c10::prim::Param) return v->offset() == 0;
  if (n->kind() == c10::prim::Constant) return true;
  if (!n->blocks().empty() || n->inputs().empty()) return false;
  return std::all_of(n->inputs().begin(), n->inputs().end(), attribute_only);
}

// Whether every call of the observer `name` in `owner`'s forward lies inside an if whose
// condition the module's attributes decide (torchvision's `if self.use_res_connect:`): for
// this instance it either always runs or never does.
bool only_in_attribute_branches(const torch::jit::Module& owner, const std::string& name) {
  if (!owner.find_method("forward")) return false;
  const std::shared_ptr<torch::jit::Graph> g = owner.get_method("forward").graph();
  std::vector<torch::jit::Node*> gets;
  jit_walk::collect_if(
      g->block(),
      [&](const torch::jit::Node* n) {
        return n->kind() == c10::prim::GetAttr && n->s(c10::attr::name) == name && n->input(0)->node()->kind() == c10::prim::Param;
      },
      gets);
  if (gets.empty()) return false;
  for (const torch::jit::Node* get : gets) {
    bool decided = false;
    for (const torch::jit::Node* n = get->owningBlock()->owningNode(); n != nullptr && !decided;
         n = n->owningBlock()->owningNode())
      decided = n->kind() == c10::prim::If && attribute_only(n->input(0));
    if (!decided) return false;
  }
  return true;
}

// The observers InsertObservers added (attributes named "_observer_<k>" anywhere in the
// module tree) that no forward reached: their values get a scale from nothing. Those only
// inside branches the module's attributes rule out are not counted: that code never runs, and
// freezing removes it.
int unseen_observers(const torch::jit::Module& m) {
  int unseen = 0;
  for (const auto& child : m.named_children()) {
    if (child.name.find("_observer_") != std::string::npos) {
      if (child.value.hasattr("seen") && !child.value.attr("seen").toBool() &&
          !only_in_attribute_branches(m, child.name))
        ++unseen;
    } else {
      unseen += unseen_observers(child.value);
    }
  }
  return unseen;
}

bool is_quantized_op(const torch::jit::Node* n, const char* what) {
  const c10::Symbol k = n->kind();
  return std::string(k.ns().toUnqualString()) == "quantized" && std::string(k.toUnqualString()).find(what) == 0;
}

std::string static_scheme(const Engine& engine) {
  return "static int8 on LibTorch's " + engine.name +
         " engine (its graph-mode quantization passes): BatchNorm modules folded into their convolutions; weights qint8, "
         "symmetric, one scale per output channel, packed once; activations quint8" +
         (engine.reduce_range ? " (7 bits)" : "") +
         ", one scale each, calibrated on the example inputs (min/max); convolutions, Linear layers and the "
         "operations between them in int8; fp32 in and out";
}

// The int8 module LibTorch's passes make of `copy`, and what they left to say about it.
struct StaticPasses {
  torch::jit::Module module;
  int unseen = 0;    // observers no example input reached
  int reshaped = 0;  // views of the forward made reshape
};

// BatchNorm folded, observers inserted and calibrated on `args`, then quantize/dequantize
// inserted and the result finalized (the weights packed) on `engine`.
StaticPasses run_static_passes(const torch::jit::Module& copy, const Engine& engine,
                               const std::vector<c10::IValue>& args) {
  StaticPasses out;
  EngineScope scope(engine.engine);
  try {
    // FoldConvBatchNorm works on a clone with types of its own: the copy and the caller's module
    // (whose type a deep copy shares) are left as they are.
    torch::jit::Module m = torch::jit::FoldConvBatchNorm(copy);
    torch::jit::QConfigDict qconfig;
    qconfig.emplace("", torch::jit::QConfig(observer(false, engine.reduce_range), observer(true, false)));
    m = torch::jit::InsertObservers(m, "forward", qconfig, /*inplace=*/false, torch::jit::QuantType::STATIC);
    m.forward(args);  // calibration: every observer on the path records its range
    out.unseen = unseen_observers(m);
    m = torch::jit::InsertQuantDeQuant(m, "forward", /*inplace=*/true, /*debug=*/false,
                                       torch::jit::QuantType::STATIC);
    out.module = torch::jit::Finalize(m, torch::jit::QuantType::STATIC);
    std::shared_ptr<torch::jit::Graph> g = out.module.get_method("forward").graph();
    torch::jit::ConstantPropagation(g);
    // A quantized convolution's output is channels-last: `x.view(-1, n)` on it would fail.
    out.reshaped = jit_walk::views_to_reshapes(g->block());
    torch::jit::EliminateDeadCode(g);
  } catch (const std::exception& e) {
    throw std::runtime_error("quantize: LibTorch's quantization passes failed on this module: " +
                             text::torch_error_line(e.what()));
  }
  return out;
}

// The report's notes on the passes: LibTorch's warnings, views made reshape, observers never reached.
void note_passes(QuantizeReport& r, const std::vector<std::string>& warnings, const StaticPasses& p) {
  for (const std::string& w : warnings) r.notes.push_back("LibTorch: " + text::shorten(w, 200));
  if (p.reshaped > 0)
    r.notes.push_back(std::to_string(p.reshaped) + " view" + (p.reshaped == 1 ? "" : "s") +
                      " of the forward made reshape (the int8 convolutions' outputs are channels-last)");
  if (p.unseen > 0)
    r.notes.push_back(std::to_string(p.unseen) + " observed value" + (p.unseen == 1 ? " was" : "s were") +
                      " never reached by the example inputs (a branch not taken): quantized with a scale from "
                      "nothing; calibrate on inputs that take every path");
}

// The quantized convolutions and Linear ops of `graph` (their prepacking left out).
struct Int8Ops {
  int convs = 0;
  int linears = 0;
};

Int8Ops count_int8_ops(const std::shared_ptr<torch::jit::Graph>& graph) {
  Int8Ops ops;
  std::vector<torch::jit::Node*> quantized;
  jit_walk::collect_if(
      graph->block(),
      [](const torch::jit::Node* n) { return is_quantized_op(n, "conv") || is_quantized_op(n, "linear"); }, quantized);
  for (const torch::jit::Node* n : quantized) {
    if (std::string(n->kind().toUnqualString()).find("prepack") != std::string::npos) continue;
    ++(is_quantized_op(n, "conv") ? ops.convs : ops.linears);
  }
  return ops;
}

// What ran through the engine: each of the module's `layers` converted or left in fp32 (the
// fp32 ones in the result `q` matched to the layers by their weight's shape), the bytes after,
// and a note when the int8 ops in the result do not add up to the layers converted.
void account_layers(QuantizeReport& r, const std::vector<jit_walk::Layer>& layers, const torch::jit::Module& q) {
  const std::shared_ptr<torch::jit::Graph> graph = q.get_method("forward").graph();
  std::vector<at::Tensor> fp32_weights;
  jit_walk::FrozenCopy result;
  result.copy = q;
  result.frozen = q;
  for (const jit_walk::Layer& l : jit_walk::weighted_layers(result, false)) fp32_weights.push_back(l.weight);
  const Int8Ops ops = count_int8_ops(graph);
  for (const jit_walk::Layer& l : layers) {
    QuantizedLayer layer;
    layer.name = l.name;
    layer.kind = l.op;
    layer.out_features = l.weight.size(0);
    layer.in_features = l.weight.size(1);
    auto left = std::find_if(fp32_weights.begin(), fp32_weights.end(),
                             [&](const at::Tensor& w) { return w.sizes() == l.weight.sizes(); });
    if (left != fp32_weights.end()) {
      fp32_weights.erase(left);
      layer.why = "LibTorch's quantization patterns left it in fp32 (what feeds it or reads it is not quantized)";
      ++r.skipped;
    } else {
      layer.converted = true;
      ++r.converted;
      // Packed: the int8 weight, a scale and a zero point per output channel, the fp32 bias.
      r.bytes_after += l.weight.numel() + 12 * l.weight.size(0);
    }
    r.layers.push_back(std::move(layer));
  }
  r.bytes_after += constant_bytes(graph->block());
  if (ops.convs + ops.linears != r.converted)
    r.notes.push_back("the result holds " + std::to_string(ops.convs) + " int8 convolution(s) and " +
                      std::to_string(ops.linears) + " int8 Linear op(s) for " + std::to_string(r.converted) +
                      " layers converted");
}

}  // namespace

QuantizedModule quantize_static(const torch::jit::Module& module, const Engine& engine,
                                const std::vector<at::Tensor>& example_inputs) {
  const c10::Device cpu(c10::kCPU);
  QuantizedModule out;
  QuantizeReport& r = out.report;
  r.engine = engine.name;
  r.reduce_range = engine.reduce_range;
  r.scheme = static_scheme(engine);

  // The layers as they are, named, and the reference outputs: the module's own fp32.
  jit_walk::FrozenCopy f = jit_walk::frozen_copy(module, cpu);
  const std::vector<jit_walk::Layer> layers = jit_walk::weighted_layers(f, false);
  r.bytes_before = constant_bytes(f.frozen.get_method("forward").graph()->block());

  compat::AutocastGuard no_autocast(c10::DeviceType::CPU, false, compat::autocast_dtype(c10::DeviceType::CPU));
  at::NoGradGuard no_grad;
  std::vector<c10::IValue> args;
  for (const auto& x : example_inputs) args.emplace_back(x.to(cpu));
  std::vector<at::Tensor> ref;
  try {
    ref = flatten_outputs(f.copy.forward(args));
  } catch (const std::exception& e) {
    throw std::invalid_argument("quantize: the module refuses the example inputs: " + text::torch_error_line(e.what()));
  }

  compat::WarningCollector warnings;
  StaticPasses passes = run_static_passes(f.copy, engine, args);
  note_passes(r, warnings.messages(), passes);
  account_layers(r, layers, passes.module);

  std::vector<at::Tensor> got;
  try {
    got = flatten_outputs(passes.module.forward(args));
  } catch (const std::exception& e) {
    throw std::runtime_error("quantize: the int8 module fails on the example inputs: " +
                             text::torch_error_line(e.what()));
  }
  set_error(r, got, ref);
  out.module = std::move(passes.module);
  return out;
}

}  // namespace accelkit::quant
