// Walking a TorchScript module's frozen graph for its layers (quantize.cpp, alignment.cpp).
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/freeze_module.h>

#include "accelkit/sdk/torch_compat.hpp"

namespace accelkit::jit_walk {

// A layer's name from its weight's: "fc1" for "fc1.weight" (other names as they are).
inline std::string layer_of(std::string weight) {
  if (const auto dot = weight.rfind('.'); dot != std::string::npos && weight.substr(dot) == ".weight") weight.resize(dot);
  return weight;
}

// The module's parameters (then its other tensor attributes) by storage, named after their
// module ("fc1" for "fc1.weight"): freezing turns them into graph constants that share the
// storage, and this names them.
inline std::map<const void*, std::string> layer_names(const torch::jit::Module& m) {
  std::map<const void*, std::string> names;
  for (const auto& p : m.named_parameters()) names.emplace(p.value.data_ptr(), layer_of(p.name));
  for (const auto& a : m.named_attributes())
    if (a.value.isTensor() && a.value.toTensor().defined()) names.emplace(a.value.toTensor().data_ptr(), layer_of(a.name));
  return names;
}

// Every node of `block` and the blocks inside it for which `keep(node)` holds, in order.
template <typename Keep>
void collect_if(torch::jit::Block* block, const Keep& keep, std::vector<torch::jit::Node*>& out) {
  for (torch::jit::Node* n : block->nodes()) {
    if (keep(n)) out.push_back(n);
    for (torch::jit::Block* b : n->blocks()) collect_if(b, keep, out);
  }
}

// Every node of one of `kinds` ("aten::linear", ...) in `block` and the blocks inside it, in order.
inline void collect(torch::jit::Block* block, const std::vector<c10::Symbol>& kinds, std::vector<torch::jit::Node*>& out) {
  collect_if(
      block, [&](const torch::jit::Node* n) { return std::find(kinds.begin(), kinds.end(), n->kind()) != kinds.end(); },
      out);
}

// Every aten::view of `block` (and the blocks inside it) whose result nothing modifies in place
// becomes aten::reshape: the same result, but it also accepts a tensor whose strides a view
// cannot express (a channels-last or quantized convolution's output flattened by `x.view(-1,
// n)`), copying only then. Returns how many were replaced.
inline int views_to_reshapes(torch::jit::Block* block) {
  const c10::Symbol view = c10::Symbol::fromQualString("aten::view");
  const c10::Symbol reshape = c10::Symbol::fromQualString("aten::reshape");
  int replaced = 0;
  std::vector<torch::jit::Node*> views;
  collect(block, {view}, views);
  for (torch::jit::Node* n : views) {
    if (n->inputs().size() != 2) continue;
    const bool mutated = std::any_of(n->output()->uses().begin(), n->output()->uses().end(), [](const torch::jit::Use& u) {
      const std::string op = u.user->kind().toUnqualString();
      return !op.empty() && op.back() == '_';
    });
    if (mutated) continue;
    torch::jit::WithInsertPoint guard(n);
    torch::jit::Value* r = n->owningGraph()->insert(reshape, {n->input(0), n->input(1)});
    r->setType(n->output()->type());
    n->output()->replaceAllUsesWith(r);
    n->destroy();
    ++replaced;
  }
  return replaced;
}

// A deep copy of the module (eval, on `device`), its frozen form and the layer names: what a
// walk of the layers starts from. Frozen without autocast: freezing would bake the thread's
// casts into the graph.
struct FrozenCopy {
  torch::jit::Module copy;
  torch::jit::Module frozen;
  std::map<const void*, std::string> names;
};
inline FrozenCopy frozen_copy(const torch::jit::Module& module, c10::Device device) {
  FrozenCopy f{module.deepcopy(), {}, {}};
  f.copy.eval();
  f.copy.to(device);
  f.names = layer_names(f.copy);
  compat::AutocastGuard no_autocast(device.type(), false, compat::autocast_dtype(device.type()));
  f.frozen = torch::jit::freeze(f.copy);
  return f;
}

// A Linear, convolution or embedding node of the frozen graph whose weight is a constant.
struct Layer {
  std::string op;     // "linear" | "conv" | "embedding"
  std::string name;   // "fc1", "layer1.0.conv1" (BatchNorm folded in), else "<op> #k"
  at::Tensor weight;  // [out, in / groups, ...] ([rows, dim] for an embedding)
  std::int64_t groups = 1;  // a convolution's
};

// The input that `v` is, past the JIT's autocast casts: a module that has run under autocast
// carries them in its graph.
inline torch::jit::Value* past_autocast_casts(torch::jit::Value* v) {
  const c10::Symbol to_reduced = c10::Symbol::fromQualString("aten::_autocast_to_reduced_precision");
  const c10::Symbol to_full = c10::Symbol::fromQualString("aten::_autocast_to_full_precision");
  while (v->node()->kind() == to_reduced || v->node()->kind() == to_full) v = v->node()->input(0);
  return v;
}

// The names of the weights of the `kinds` nodes of the module frozen as it is (its attributes
// made constants and the branches they decide taken, its parameters kept, no numeric rewrite),
// in graph order: "layer1.0.conv1" for layer1[0].conv1.weight; "" for a weight that is no
// attribute. `torch::jit::freeze` then folds a BatchNorm into its convolution's weight, a new
// tensor no parameter shares: the k-th such node of the frozen graph is the k-th here where
// both graphs have as many.
inline std::vector<std::string> weight_names_before_folding(const FrozenCopy& f, const std::vector<c10::Symbol>& kinds,
                                                            int weight_input) {
  torch::jit::Module plain;
  try {
    plain = torch::jit::freeze_module(f.copy, {}, /*freezeInterfaces=*/true, /*preserveParameters=*/true);
  } catch (const std::exception&) {
    return {};  // no names from here: the layers keep "<op> #k"
  }
  std::vector<torch::jit::Node*> nodes;
  collect(plain.get_method("forward").graph()->block(), kinds, nodes);
  std::vector<std::string> out;
  for (torch::jit::Node* n : nodes) {
    const torch::jit::Value* v = past_autocast_casts(n->input(static_cast<std::size_t>(weight_input)));
    std::vector<std::string> parts;
    while (v->node()->kind() == c10::prim::GetAttr) {
      parts.push_back(v->node()->s(c10::attr::name));
      v = v->node()->input(0);
    }
    std::string path;
    if (v->node()->kind() == c10::prim::Param && !parts.empty())  // the chain starts at self
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) path += (path.empty() ? "" : ".") + *it;
    else if (const auto w = torch::jit::toIValue(v); w && w->isTensor())
      if (const auto it = f.names.find(w->toTensor().data_ptr()); it != f.names.end()) path = it->second;
    out.push_back(layer_of(path));
  }
  return out;
}

// The layers of the frozen graph of `f` in graph order (`embeddings` too where asked); the
// k-th node of an op counts every such node, constant weight or not. A weight that no
// parameter shares (a BatchNorm folded into a convolution) is named by the convolution's
// place before the folding (weight_names_before_folding).
inline std::vector<Layer> weighted_layers(const FrozenCopy& f, bool embeddings) {
  const auto sym = [](const char* s) { return c10::Symbol::fromQualString(s); };
  const std::vector<c10::Symbol> conv_kinds{sym("aten::conv1d"), sym("aten::conv2d"), sym("aten::conv3d"),
                                            sym("aten::_convolution")};
  std::vector<c10::Symbol> kinds = conv_kinds;
  kinds.push_back(sym("aten::linear"));
  if (embeddings) kinds.push_back(sym("aten::embedding"));
  torch::jit::Block* block = f.frozen.get_method("forward").graph()->block();
  std::vector<torch::jit::Node*> nodes, frozen_convs;
  collect(block, kinds, nodes);
  collect(block, conv_kinds, frozen_convs);
  std::vector<std::string> conv_paths = weight_names_before_folding(f, conv_kinds, 1);
  if (conv_paths.size() != frozen_convs.size()) conv_paths.clear();
  std::map<std::string, int> counts;
  std::vector<Layer> out;
  for (torch::jit::Node* n : nodes) {
    const bool embedding = n->kind() == sym("aten::embedding");
    Layer l;
    l.op = embedding ? "embedding" : n->kind() == sym("aten::linear") ? "linear" : "conv";
    const int k = ++counts[l.op];
    const auto w = torch::jit::toIValue(n->input(embedding ? 0 : 1));
    if (!w || !w->isTensor() || w->toTensor().dim() < 2) continue;  // computed at run time
    l.weight = w->toTensor();
    if (l.op == "conv") {
      const std::size_t groups_input = n->kind() == sym("aten::_convolution") ? 8 : 6;
      if (const auto g = torch::jit::toIValue(n->input(groups_input)); g && g->isInt())
        l.groups = g->toInt();
    }
    if (const auto it = f.names.find(l.weight.data_ptr()); it != f.names.end()) l.name = it->second;
    if (l.name.empty() && l.op == "conv" && static_cast<std::size_t>(k) <= conv_paths.size())
      l.name = conv_paths[static_cast<std::size_t>(k) - 1];
    if (l.name.empty()) l.name = l.op + " #" + std::to_string(k);
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace accelkit::jit_walk
