// check_alignment: dimension sizes against the multiple the device's plugin states.
#include "accelkit/alignment.hpp"

#include <sstream>

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>

#include "accelkit/runtime.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "jit_walk.hpp"

namespace accelkit {

std::string AlignmentReport::summary() const {
  std::ostringstream s;
  if (multiple <= 0) {
    s << device << " states no alignment for " << dtype << " (no \"align." << dtype << "\" from its plugin): nothing checked\n";
    return s.str();
  }
  s << layers << " layer" << (layers == 1 ? "" : "s") << " checked against multiples of " << multiple << " (" << dtype
    << " on " << device << "): " << (issues.empty() ? "all aligned" : std::to_string(issues.size()) + " size(s) not") << '\n';
  for (const AlignmentIssue& i : issues)
    s << "  " << i.layer << " (" << i.op << ") " << i.dim << " " << i.size << " -> pad to " << i.padded << '\n';
  return s.str();
}

AlignmentReport check_alignment(const torch::jit::Module& module, const DeviceInfo& device, const std::string& dtype) {
  AlignmentReport r;
  r.device = device.id;
  r.dtype = dtype;
  if (const auto it = device.capabilities.extra.find("align." + dtype); it != device.capabilities.extra.end()) {
    try {
      r.multiple = std::stoll(it->second);
    } catch (const std::exception&) {
      r.multiple = 0;  // a plugin's unreadable statement: nothing to check against
    }
  }
  if (r.multiple <= 0) return r;

  torch::jit::Module m = module.deepcopy();
  m.eval();
  const auto names = jit_walk::layer_names(m);
  compat::AutocastGuard no_autocast(c10::DeviceType::CPU, false, compat::autocast_dtype(c10::DeviceType::CPU));
  torch::jit::Module frozen = torch::jit::freeze(m);
  const auto sym = [](const char* s) { return c10::Symbol::fromQualString(s); };
  std::vector<torch::jit::Node*> nodes;
  jit_walk::collect(frozen.get_method("forward").graph()->block(),
                    {sym("aten::linear"), sym("aten::conv1d"), sym("aten::conv2d"), sym("aten::conv3d"),
                     sym("aten::_convolution"), sym("aten::embedding")},
                    nodes);
  std::map<std::string, int> counts;
  for (torch::jit::Node* n : nodes) {
    const bool embedding = n->kind() == sym("aten::embedding");
    const std::string op = embedding ? "embedding" : n->kind() == sym("aten::linear") ? "linear" : "conv";
    const int k = ++counts[op];
    const std::optional<c10::IValue> w = torch::jit::toIValue(n->input(embedding ? 0 : 1));
    if (!w || !w->isTensor() || w->toTensor().dim() < 2) continue;  // computed at run time
    const at::Tensor weight = w->toTensor();
    ++r.layers;
    const auto name = names.find(weight.data_ptr());
    const std::string layer = name != names.end() ? name->second : op + " #" + std::to_string(k);
    auto check = [&](const char* dim, std::int64_t size) {
      if (size % r.multiple == 0) return;
      r.issues.push_back({layer, op, dim, size, (size + r.multiple - 1) / r.multiple * r.multiple});
    };
    if (embedding) {
      check("embedding_dim", weight.size(1));
    } else if (op == "linear") {
      check("in_features", weight.size(1));
      check("out_features", weight.size(0));
    } else {
      check("in_channels", weight.size(1));
      check("out_channels", weight.size(0));
    }
  }
  return r;
}

AlignmentReport Runtime::check_alignment(const torch::jit::Module& module, const std::string& dtype) const {
  return accelkit::check_alignment(module, device_->info(), dtype.empty() ? std::string(to_string(plan_.dtype)) : dtype);
}

}  // namespace accelkit
