// Walking a TorchScript module's frozen graph for its layers (quantize.cpp, alignment.cpp).
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "accelkit/sdk/torch_compat.hpp"

namespace accelkit::jit_walk {

// A layer's name from its weight's: "fc1" for "fc1.weight" (other names as they are).
inline std::string layer_of(std::string weight) {
  if (const auto dot = weight.rfind('.'); dot != std::string::npos && weight.substr(dot) == ".weight") weight.resize(dot);
  return weight;
}

// The module's parameters by storage, named after their module ("fc1" for "fc1.weight"):
// freezing turns parameters into graph constants that share the storage, and this names them.
inline std::map<const void*, std::string> layer_names(const torch::jit::Module& m) {
  std::map<const void*, std::string> names;
  for (const auto& p : m.named_parameters()) names.emplace(p.value.data_ptr(), layer_of(p.name));
  return names;
}

// Every node of one of `kinds` ("aten::linear", ...) in `block` and the blocks inside it, in order.
inline void collect(torch::jit::Block* block, const std::vector<c10::Symbol>& kinds, std::vector<torch::jit::Node*>& out) {
  for (torch::jit::Node* n : block->nodes()) {
    if (std::find(kinds.begin(), kinds.end(), n->kind()) != kinds.end()) out.push_back(n);
    for (torch::jit::Block* b : n->blocks()) collect(b, kinds, out);
  }
}

// The names of the weights the `kinds` nodes of the module's forward take ("layer1.0.conv1"
// for layer1[0].conv1.weight, "c1w" for an attribute c1w), in graph order, from the unfrozen
// graph with its method calls inlined; "" where a weight is no attribute chain. Freezing folds
// a BatchNorm into its convolution's weight (a new tensor no parameter shares): the k-th such
// node of the frozen graph is the k-th here where both graphs have as many.
inline std::vector<std::string> weight_paths(const torch::jit::Module& m, const std::vector<c10::Symbol>& kinds,
                                             int weight_input) {
  std::shared_ptr<torch::jit::Graph> g = m.get_method("forward").graph()->copy();
  torch::jit::Inline(*g);
  std::vector<torch::jit::Node*> nodes;
  collect(g->block(), kinds, nodes);
  std::vector<std::string> out;
  for (torch::jit::Node* n : nodes) {
    std::vector<std::string> parts;
    const torch::jit::Value* v = n->input(static_cast<std::size_t>(weight_input));
    while (v->node()->kind() == c10::prim::GetAttr) {
      parts.push_back(v->node()->s(c10::attr::name));
      v = v->node()->input(0);
    }
    std::string path;
    if (v->node()->kind() == c10::prim::Param)  // the chain starts at self
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) path += (path.empty() ? "" : ".") + *it;
    out.push_back(layer_of(path));
  }
  return out;
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

}  // namespace accelkit::jit_walk
