// check_alignment: dimension sizes against the multiple the device's plugin states.
#include "accelkit/alignment.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/jit/ir/constants.h>

#include "accelkit/model_file.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/sdk/torch_compat.hpp"
#include "jit_walk.hpp"
#include "median.hpp"

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
      << (i.ms > 0 ? " (measured on " + i.timed_on + ": " + ms_text(i.ms) + " as is, " + ms_text(i.padded_ms) + " padded)"
                   : "")
      << '\n';
  for (const std::string& n : not_timed) s << "  not timed: " << n << '\n';
  return s.str();
}

namespace {

// Median ms of x[64, in] W[out, in]^T in `type`.
double linear_ms(std::int64_t in, std::int64_t out, at::ScalarType type) {
  const at::Tensor x = at::randn({64, in}).to(type);
  const at::Tensor w = at::randn({out, in}).to(type);
  return stats::median_run_ms([&] { at::linear(x, w); }, 3, 9);
}

std::string dims_text(at::IntArrayRef shape) {
  std::string s;
  for (const std::int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// A convolution as the model called it in one forward (aten::_convolution's arguments, which
// every convolution op of the frozen graph reaches), found again by its weight.
struct ConvCall {
  std::vector<std::int64_t> input, weight, stride, padding, dilation, output_padding;
  bool bias = false;
  bool transposed = false;
  std::int64_t groups = 1;
};
thread_local std::map<const void*, ConvCall>* t_conv_calls = nullptr;

std::unique_ptr<at::ObserverContext> record_conv(const at::RecordFunction& fn) {
  if (t_conv_calls == nullptr || std::strcmp(fn.name(), "aten::_convolution") != 0) return nullptr;
  const auto in = fn.inputs();
  if (in.size() < 9 || !in[0].isTensor() || !in[1].isTensor()) return nullptr;
  const at::Tensor& weight = in[1].toTensor();
  ConvCall c;
  c.input = in[0].toTensor().sizes().vec();
  c.weight = weight.sizes().vec();
  c.bias = in[2].isTensor() && in[2].toTensor().defined();
  c.stride = in[3].toIntVector();
  c.padding = in[4].toIntVector();
  c.dilation = in[5].toIntVector();
  c.transposed = in[6].toBool();
  c.output_padding = in[7].toIntVector();
  c.groups = in[8].toInt();
  t_conv_calls->emplace(weight.data_ptr(), std::move(c));  // the first call of a weight shared by several
  return nullptr;
}

// Runs `module` once on `inputs` and returns the convolutions it called, by weight.
std::map<const void*, ConvCall> conv_calls(torch::jit::Module& module, const std::vector<at::Tensor>& inputs) {
  std::map<const void*, ConvCall> calls;
  // The observer, on this thread for this forward only.
  struct Observing {
    at::CallbackHandle handle;
    explicit Observing(std::map<const void*, ConvCall>& into) {
      t_conv_calls = &into;
      handle = at::addThreadLocalCallback(
          at::RecordFunctionCallback(&record_conv).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
    }
    ~Observing() {
      at::removeCallback(handle);
      t_conv_calls = nullptr;
    }
  } observing(calls);
  try {
    const at::NoGradGuard no_grad;
    module.forward(std::vector<c10::IValue>(inputs.begin(), inputs.end()));
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("the model's forward rejected the example inputs: ") +
                                torch_error_summary(e.what()));
  }
  return calls;
}

// Median ms of the convolution `c` in `type` with `in_channels` and `out_channels`.
double conv_ms(const ConvCall& c, std::int64_t in_channels, std::int64_t out_channels, at::ScalarType type) {
  std::vector<std::int64_t> input = c.input, weight = c.weight;
  input[1] = in_channels;
  weight[0] = out_channels;
  weight[1] = in_channels;
  const at::Tensor x = at::randn(input).to(type), w = at::randn(weight).to(type);
  const at::Tensor b = c.bias ? at::randn({out_channels}).to(type) : at::Tensor();
  return stats::median_run_ms(
      [&] { at::convolution(x, w, b, c.stride, c.padding, c.dilation, false, c.output_padding, 1); }, 3, 9);
}

}  // namespace

AlignmentReport check_alignment(const torch::jit::Module& module, const DeviceInfo& device, const std::string& dtype,
                                bool measure, const std::vector<at::Tensor>& example_inputs) {
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

  jit_walk::FrozenCopy f = jit_walk::frozen_copy(module, c10::Device(c10::kCPU));
  torch::jit::Module& frozen = f.frozen;
  const bool timed_dtype = dtype == "fp32" || dtype == "bf16";
  const at::ScalarType type = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  // The convolutions' calls in one forward of the example inputs (in fp32: the shapes are what
  // matters), when they are to be timed.
  std::optional<std::map<const void*, ConvCall>> calls;
  if (measure && timed_dtype && !example_inputs.empty()) calls = conv_calls(frozen, example_inputs);
  int conv_untimed = 0;
  std::string conv_untimed_why;
  for (const jit_walk::Layer& l : jit_walk::weighted_layers(f, true)) {
    const bool embedding = l.op == "embedding";
    const std::string& op = l.op;
    const std::string& layer = l.name;
    const at::Tensor& weight = l.weight;
    ++r.layers;
    auto pad = [&](std::int64_t size) { return (size + r.multiple - 1) / r.multiple * r.multiple; };
    auto check = [&](const char* dim, std::int64_t size) {
      if (size % r.multiple == 0) return;
      r.issues.push_back({layer, op, dim, size, pad(size), 0, 0, {}});
    };
    if (embedding) {
      check("embedding_dim", weight.size(1));
    } else if (op == "linear") {
      const std::size_t first = r.issues.size();
      const std::int64_t in = weight.size(1), out = weight.size(0);
      check("in_features", in);
      check("out_features", out);
      if (measure && r.issues.size() > first && timed_dtype) {
        // The layer's GEMM as it is and with both sizes padded: the cost of its misalignment.
        const double ms = linear_ms(in, out, type), padded_ms = linear_ms(pad(in), pad(out), type);
        for (std::size_t i = first; i < r.issues.size(); ++i) {
          r.issues[i].ms = ms;
          r.issues[i].padded_ms = padded_ms;
          r.issues[i].timed_on = "64x" + std::to_string(in);
        }
      }
    } else {
      const std::size_t first = r.issues.size();
      // A grouped convolution's channels are its totals: a depthwise one has a single input
      // channel per group, which no padding changes.
      const std::int64_t in = weight.size(1) * l.groups, out = weight.size(0);
      check("in_channels", in);
      check("out_channels", out);
      if (!measure || r.issues.size() == first || !timed_dtype) continue;
      // The convolution as the forward called it, its channels as they are and padded.
      const ConvCall* call = nullptr;
      if (calls) {
        const auto it = calls->find(weight.data_ptr());
        if (it != calls->end()) call = &it->second;
      }
      std::string why;
      if (!calls) why = "their cost depends on the image they are given: pass the model's inputs (report --input SHAPE)";
      else if (call == nullptr) why = "not called in the forward of the example inputs";
      else if (call->transposed || call->groups != 1) why = "grouped or transposed convolutions are not timed";
      if (!why.empty()) {
        ++conv_untimed;
        if (conv_untimed_why.empty()) conv_untimed_why = why;
        continue;
      }
      const double ms = conv_ms(*call, in, out, type), padded_ms = conv_ms(*call, pad(in), pad(out), type);
      for (std::size_t i = first; i < r.issues.size(); ++i) {
        r.issues[i].ms = ms;
        r.issues[i].padded_ms = padded_ms;
        r.issues[i].timed_on = dims_text(call->input);
      }
    }
  }
  if (measure && !timed_dtype && !r.issues.empty())
    r.not_timed.push_back("every layer: only fp32 and bf16 are timed, not " + dtype);
  if (conv_untimed > 0)
    r.not_timed.push_back(std::to_string(conv_untimed) + " convolution" + (conv_untimed == 1 ? "" : "s") + ": " +
                          conv_untimed_why);
  return r;
}

AlignmentReport Runtime::check_alignment(const torch::jit::Module& module, const std::string& dtype, bool measure,
                                         const std::vector<at::Tensor>& example_inputs) const {
  return accelkit::check_alignment(module, device_->info(), dtype.empty() ? std::string(to_string(plan_.dtype)) : dtype,
                                   measure && torch_device_.is_cpu(), example_inputs);
}

}  // namespace accelkit
