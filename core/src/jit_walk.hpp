// Walking a TorchScript module's frozen graph for its layers (quantize.cpp, alignment.cpp).
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include "accelkit/sdk/torch_compat.hpp"

namespace accelkit::jit_walk {

// The module's parameters by storage, named after their module ("fc1" for "fc1.weight"):
// freezing turns parameters into graph constants that share the storage, and this names them.
inline std::map<const void*, std::string> layer_names(const torch::jit::Module& m) {
  std::map<const void*, std::string> names;
  for (const auto& p : m.named_parameters()) {
    std::string name = p.name;
    if (const auto dot = name.rfind('.'); dot != std::string::npos && name.substr(dot) == ".weight") name.resize(dot);
    names.emplace(p.value.data_ptr(), name);
  }
  return names;
}

// Every node of one of `kinds` ("aten::linear", ...) in `block` and the blocks inside it, in order.
inline void collect(torch::jit::Block* block, const std::vector<c10::Symbol>& kinds, std::vector<torch::jit::Node*>& out) {
  for (torch::jit::Node* n : block->nodes()) {
    if (std::find(kinds.begin(), kinds.end(), n->kind()) != kinds.end()) out.push_back(n);
    for (torch::jit::Block* b : n->blocks()) collect(b, kinds, out);
  }
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
