// quantize: dynamic INT8 Linear through LibTorch's quantized engine (quantize.hpp).
#include "accelkit/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/QEngine.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include "accelkit/inference.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/sdk/support/qengine.hpp"
#include "jit_walk.hpp"
#include "quantize_support.hpp"
#include "accelkit/base/strings.hpp"

namespace accelkit {

namespace quant {

Engine engine_of(const DeviceInfo& info) {
  if (!info.capabilities.has(Capability::int8_linear))
    throw std::invalid_argument("quantize: " + info.id + " offers no int8 (capability int8_linear); its plugin " +
                                "names no quantized engine LibTorch can run there");
  const auto it = info.capabilities.extra.find(kInt8EngineKey);
  Engine e;
  e.name = it == info.capabilities.extra.end() ? "" : it->second;
  const std::optional<at::QEngine> engine = support::qengine_named(e.name);
  if (!engine)
    throw std::invalid_argument("quantize: " + info.id + "'s plugin names the quantized engine '" +
                                text::shorten(e.name, 40) + "', which this LibTorch does not have");
  e.engine = *engine;
  e.reduce_range = info.capabilities.has(kInt8ReduceRangeKey);
  return e;
}

std::int64_t constant_bytes(torch::jit::Block* block) {
  std::int64_t bytes = 0;
  for (torch::jit::Node* n : block->nodes()) {
    if (n->kind() == c10::prim::Constant && n->output()->type()->kind() == c10::TypeKind::TensorType) {
      const auto v = torch::jit::toIValue(n->output());
      if (v && v->isTensor()) bytes += static_cast<std::int64_t>(v->toTensor().nbytes());
    }
    for (torch::jit::Block* b : n->blocks()) bytes += constant_bytes(b);
  }
  return bytes;
}

void set_error(QuantizeReport& r, const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& ref) {
  const OutputError e = compare_outputs(got, ref);
  r.rel_error = e.rel_error;
  r.max_rel_error = e.max_rel_error;
  r.cosine = e.cosine;
}

}  // namespace quant

namespace {

using quant::constant_bytes;

using torch::jit::Node;
using torch::jit::Value;

// Symmetric per-output-channel qint8: scale = max |w_row| / 127, zero point 0.
at::Tensor quantize_weight(const at::Tensor& w) {
  const at::Tensor scales = (w.abs().amax(1).to(at::kDouble) / 127.0).clamp_min(1e-12);
  const at::Tensor zero_points = at::zeros({w.size(0)}, at::TensorOptions().dtype(at::kLong));
  return at::quantize_per_channel(w.contiguous(), scales, zero_points, 0, at::kQInt8);
}

// The engine's packed weight (a LinearPackedParamsBase object), by quantized::linear_prepack.
c10::IValue prepack(const at::Tensor& qweight, const std::optional<at::Tensor>& bias) {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_prepack", "");
  torch::jit::Stack stack{qweight, bias ? c10::IValue(*bias) : c10::IValue()};
  op.callBoxed(&stack);
  return stack.at(0);
}

std::string fmt(double v, int precision = 3) {
  std::ostringstream s;
  s.precision(precision);
  s << v;
  return s.str();
}

// Static quantization (conv = int8): what it needs checked, then LibTorch's passes.
QuantizedModule quantize_int8_convs(const Runtime& rt, const torch::jit::Module& module, const QuantizeOptions& o,
                                    const std::vector<at::Tensor>& example_inputs) {
  if (o.linear != QuantDtype::int8)
    throw std::invalid_argument("quantize: int8 convolutions come with int8 Linear layers (static quantization "
                                "converts both); ask linear = int8 with conv = int8");
  if (example_inputs.empty())
    throw std::invalid_argument("quantize: int8 convolutions need example inputs: the activations' ranges are "
                                "calibrated on them");
  if (!rt.device().is_cpu())
    throw std::invalid_argument("quantize: int8 convolutions run on LibTorch's CPU quantized engine, and this "
                                "runtime's device is " + rt.device().str());
  return quant::quantize_static(module, quant::engine_of(rt.device_handle()->info()), example_inputs);
}

std::string dynamic_scheme(const quant::Engine& q) {
  return "dynamic int8 Linear on LibTorch's " + q.name +
         " engine: weights qint8, symmetric, one scale per output channel, packed once; activations " +
         "quantized per call from their own range" + (q.reduce_range ? " (7 bits)" : "") + "; fp32 in and out";
}

// Why a Linear layer of `in_features` inputs whose weight is the constant `weight` and whose
// bias is `b` stays in fp32; "" when the engine can take it.
std::string linear_refusal(const at::Tensor& weight, const std::optional<c10::IValue>& b, std::int64_t in_features,
                           const QuantizeOptions& o) {
  if (weight.dim() != 2 || weight.scalar_type() != at::kFloat) return "its weight is not a 2-D fp32 tensor";
  if (!weight.device().is_cpu())
    return "its weight is on " + weight.device().str() + ": the quantized engine runs on the CPU";
  if (!b || !(b->isNone() || (b->isTensor() && b->toTensor().scalar_type() == at::kFloat)))
    return "its bias is computed at run time or not fp32";
  if (in_features < o.min_in_features)
    return std::to_string(in_features) + " input features (< " + std::to_string(o.min_in_features) +
           "): quantizing the activations would cost more than the GEMM";
  return {};
}

// The aten::linear node `n` replaced in its graph by quantized::linear_dynamic on `packed`.
void replace_with_dynamic_linear(Node* n, const c10::IValue& packed, bool reduce_range) {
  torch::jit::Graph& graph = *n->owningGraph();
  torch::jit::WithInsertPoint guard(n);
  Value* packed_value = graph.insertConstant(packed);
  Value* rr = graph.insertConstant(reduce_range);
  // fp32 activations whatever ran before (a caller's autocast may have made them bf16);
  // a no-op when they already are.
  Value* x = graph.insert(c10::aten::to, {n->input(0), graph.insertConstant(static_cast<std::int64_t>(at::kFloat))});
  Value* y = graph.insert(c10::Symbol::fromQualString("quantized::linear_dynamic"), {x, packed_value, rr});
  y->setType(n->output()->type());
  n->output()->replaceAllUsesWith(y);
  n->destroy();
}

// The `k`-th Linear node `n` as a report line, converted to the engine's dynamic int8 Linear
// when its weight and bias allow it; `bytes_after` grows by what its packed weight holds.
QuantizedLayer convert_linear(Node* n, int k, const std::map<const void*, std::string>& names,
                              const QuantizeOptions& o, bool reduce_range, std::int64_t& bytes_after) {
  QuantizedLayer layer;
  layer.name = "linear #" + std::to_string(k);
  const std::optional<c10::IValue> w = torch::jit::toIValue(n->input(1));
  const std::optional<c10::IValue> b = torch::jit::toIValue(n->input(2));
  if (!w || !w->isTensor()) {
    layer.why = "its weight is computed at run time, not a constant of the model";
    return layer;
  }
  const at::Tensor weight = w->toTensor();
  if (auto it = names.find(weight.data_ptr()); it != names.end()) layer.name = it->second;
  if (weight.dim() == 2) {
    layer.out_features = weight.size(0);
    layer.in_features = weight.size(1);
  }
  layer.why = linear_refusal(weight, b, layer.in_features, o);
  if (!layer.why.empty()) return layer;
  const std::optional<at::Tensor> bias = b->isNone() ? std::nullopt : std::optional<at::Tensor>(b->toTensor());
  replace_with_dynamic_linear(n, prepack(quantize_weight(weight), bias), reduce_range);
  layer.converted = true;
  // Packed: the int8 weight, a (double) scale per output channel and the fp32 bias.
  bytes_after += layer.in_features * layer.out_features + 8 * layer.out_features +
                 (bias ? static_cast<std::int64_t>(bias->nbytes()) : 0);
  return layer;
}

// The report's error on the example inputs: the quantized `frozen` against the module's own `m`.
void measure_dynamic_error(QuantizeReport& r, torch::jit::Module& m, torch::jit::Module& frozen,
                           const std::vector<at::Tensor>& example_inputs, c10::Device device) {
  c10::InferenceMode guard;
  std::vector<c10::IValue> args;
  for (const auto& x : example_inputs) args.emplace_back(x.to(device));
  std::vector<at::Tensor> ref, got;
  try {
    ref = flatten_outputs(m.forward(args));
    got = flatten_outputs(frozen.forward(args));
  } catch (const std::exception& e) {
    throw std::invalid_argument("quantize: the module refuses the example inputs: " + text::torch_error_line(e.what()));
  }
  quant::set_error(r, got, ref);
}

}  // namespace

std::string QuantizeReport::summary() const {
  std::ostringstream s;
  s << scheme << "\n  " << converted << " layer" << (converted == 1 ? "" : "s") << " converted, " << skipped
    << " kept in fp32; constants " << fmt(static_cast<double>(bytes_before) / 1e6) << " MB -> "
    << fmt(static_cast<double>(bytes_after) / 1e6) << " MB\n";
  for (const QuantizedLayer& l : layers)
    s << "  " << (l.converted ? "int8  " : "fp32  ") << l.name << " (" << (l.kind == "conv" ? "conv " : "")
      << l.in_features << " -> " << l.out_features
      << ")" << (l.converted ? "" : ": " + l.why) << '\n';
  if (cosine)
    s << "  on the example inputs vs fp32: relative error " << fmt(*rel_error) << ", max relative "
      << fmt(max_rel_error.value_or(0)) << ", cosine " << fmt(*cosine, 6) << '\n';
  for (const std::string& n : notes) s << "  " << n << '\n';
  return s.str();
}

QuantizedModule quantize(const Runtime& rt, const torch::jit::Module& module, const QuantizeOptions& o,
                         const std::vector<at::Tensor>& example_inputs) {
  if (o.conv == QuantDtype::int8) return quantize_int8_convs(rt, module, o, example_inputs);
  if (o.linear == QuantDtype::none) throw std::invalid_argument("quantize: nothing asked (linear = none)");
  const quant::Engine q = quant::engine_of(rt.device_handle()->info());

  QuantizedModule out;
  QuantizeReport& r = out.report;
  r.engine = q.name;
  r.reduce_range = q.reduce_range;
  r.scheme = dynamic_scheme(q);

  jit_walk::FrozenCopy f = jit_walk::frozen_copy(module, rt.device());
  // The example inputs run as the module's own fp32 (the thread's autocast may be on).
  compat::AutocastGuard no_autocast(rt.device().type(), false, compat::autocast_dtype(rt.device().type()));
  const std::shared_ptr<torch::jit::Graph> graph = f.frozen.get_method("forward").graph();
  r.bytes_before = constant_bytes(graph->block());

  std::vector<Node*> linears;
  jit_walk::collect(graph->block(), {c10::Symbol::fromQualString("aten::linear")}, linears);
  compat::WarningCollector warnings;
  {
    quant::EngineScope scope(q.engine);
    int k = 0;
    for (Node* n : linears) {
      QuantizedLayer layer = convert_linear(n, ++k, f.names, o, q.reduce_range, r.bytes_after);
      (layer.converted ? r.converted : r.skipped) += 1;
      r.layers.push_back(std::move(layer));
    }
  }
  torch::jit::EliminateDeadCode(graph);
  r.bytes_after += constant_bytes(graph->block());
  for (const std::string& w : warnings.messages()) r.notes.push_back("LibTorch: " + text::shorten(w, 200));

  if (!example_inputs.empty()) measure_dynamic_error(r, f.copy, f.frozen, example_inputs, rt.device());
  out.module = std::move(f.frozen);
  return out;
}

}  // namespace accelkit
