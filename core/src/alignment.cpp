// check_alignment: dimension sizes against the multiple the device's plugin states.
#include "accelkit/alignment.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>

#include "accelkit/runtime.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "jit_walk.hpp"

namespace accelkit {

namespace {
std::string ms_text(double ms) {
  std::ostringstream s;
  s.precision(3);
  s << ms << " ms";
  return s.str();
}
}  // namespace

std::string AlignmentReport::summary() const {
  std::ostringstream s;
  if (multiple <= 0) {
    s << device << " states no alignment for " << dtype << " (no \"align." << dtype << "\" from its plugin): nothing checked\n";
    return s.str();
  }
  s << layers << " layer" << (layers == 1 ? "" : "s") << " checked against multiples of " << multiple << " (" << dtype
    << " on " << device << "): " << (issues.empty() ? "all aligned" : std::to_string(issues.size()) + " size(s) not") << '\n';
  for (const AlignmentIssue& i : issues)
    s << "  " << i.layer << " (" << i.op << ") " << i.dim << " " << i.size << " -> pad to " << i.padded
      << (i.ms > 0 ? " (measured at batch 64: " + ms_text(i.ms) + " as is, " + ms_text(i.padded_ms) + " padded)" : "")
      << '\n';
  return s.str();
}

namespace {

// Median ms of x[64, in] W[out, in]^T in `type`, after warm-up.
double linear_ms(std::int64_t in, std::int64_t out, at::ScalarType type) {
  const at::Tensor x = at::randn({64, in}).to(type);
  const at::Tensor w = at::randn({out, in}).to(type);
  for (int i = 0; i < 3; ++i) at::linear(x, w);
  std::vector<double> ms;
  for (int i = 0; i < 9; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    at::linear(x, w);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

AlignmentReport check_alignment(const torch::jit::Module& module, const DeviceInfo& device, const std::string& dtype,
                                bool measure) {
  AlignmentReport r;
  r.device = device.id;
  r.dtype = dtype;
  if (const auto it = device.capabilities.extra.find(kAlignPrefix + dtype); it != device.capabilities.extra.end()) {
    try {
      r.multiple = std::stoll(it->second);
    } catch (const std::exception&) {
      r.multiple = 0;  // a plugin's unreadable statement: nothing to check against
    }
  }
  if (r.multiple <= 0) return r;

  const jit_walk::FrozenCopy f = jit_walk::frozen_copy(module, c10::Device(c10::kCPU));
  const auto& names = f.names;
  const torch::jit::Module& frozen = f.frozen;
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
    auto pad = [&](std::int64_t size) { return (size + r.multiple - 1) / r.multiple * r.multiple; };
    auto check = [&](const char* dim, std::int64_t size) {
      if (size % r.multiple == 0) return;
      r.issues.push_back({layer, op, dim, size, pad(size), 0, 0});
    };
    if (embedding) {
      check("embedding_dim", weight.size(1));
    } else if (op == "linear") {
      const std::size_t first = r.issues.size();
      const std::int64_t in = weight.size(1), out = weight.size(0);
      check("in_features", in);
      check("out_features", out);
      if (measure && r.issues.size() > first && (dtype == "fp32" || dtype == "bf16")) {
        // The layer's GEMM as it is and with both sizes padded: the cost of its misalignment.
        const at::ScalarType type = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
        const double ms = linear_ms(in, out, type), padded_ms = linear_ms(pad(in), pad(out), type);
        for (std::size_t i = first; i < r.issues.size(); ++i) {
          r.issues[i].ms = ms;
          r.issues[i].padded_ms = padded_ms;
        }
      }
    } else {
      check("in_channels", weight.size(1));
      check("out_channels", weight.size(0));
    }
  }
  return r;
}

AlignmentReport Runtime::check_alignment(const torch::jit::Module& module, const std::string& dtype, bool measure) const {
  return accelkit::check_alignment(module, device_->info(), dtype.empty() ? std::string(to_string(plan_.dtype)) : dtype,
                                   measure && torch_device_.is_cpu());
}

}  // namespace accelkit
