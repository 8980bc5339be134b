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
#include "accelkit/base/median.hpp"

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

// The multiple `device`'s plugin states for `dtype`; 0 when it states none or one that cannot
// be read (nothing to check against).
std::int64_t stated_multiple(const DeviceInfo& device, const std::string& dtype) {
  const auto it = device.capabilities.extra.find(kAlignPrefix + dtype);
  if (it == device.capabilities.extra.end()) return 0;
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    return 0;
  }
}

// A model's layers checked one by one against the report's multiple: each misaligned size an
// issue, timed as it is and padded when `measure` asks and the dtype is one that is timed.
class AlignmentCheck {
 public:
  // `calls`: the convolutions of one forward of the example inputs; none without inputs.
  AlignmentCheck(AlignmentReport& r, bool measure, std::optional<std::map<const void*, ConvCall>> calls)
      : r_(r),
        measure_(measure),
        timed_dtype_(r.dtype == "fp32" || r.dtype == "bf16"),
        type_(r.dtype == "bf16" ? at::kBFloat16 : at::kFloat),
        calls_(std::move(calls)) {}

  void check_layer(const jit_walk::Layer& l) {
    ++r_.layers;
    if (l.op == "embedding") flag(l, "embedding_dim", l.weight.size(1));
    else if (l.op == "linear") check_linear(l);
    else check_conv(l);
  }

  // What was left untimed, and why.
  void finish() {
    if (measure_ && !timed_dtype_ && !r_.issues.empty())
      r_.not_timed.push_back("every layer: only fp32 and bf16 are timed, not " + r_.dtype);
    if (conv_untimed_ > 0)
      r_.not_timed.push_back(std::to_string(conv_untimed_) + " convolution" + (conv_untimed_ == 1 ? "" : "s") + ": " +
                             conv_untimed_why_);
  }

 private:
  std::int64_t pad(std::int64_t size) const { return (size + r_.multiple - 1) / r_.multiple * r_.multiple; }

  void flag(const jit_walk::Layer& l, const char* dim, std::int64_t size) {
    if (size % r_.multiple == 0) return;
    r_.issues.push_back({l.name, l.op, dim, size, pad(size), 0, 0, {}});
  }

  // The timings of the issues from `first` on (one layer's).
  void set_timing(std::size_t first, double ms, double padded_ms, const std::string& timed_on) {
    for (std::size_t i = first; i < r_.issues.size(); ++i) {
      r_.issues[i].ms = ms;
      r_.issues[i].padded_ms = padded_ms;
      r_.issues[i].timed_on = timed_on;
    }
  }

  void check_linear(const jit_walk::Layer& l) {
    const std::size_t first = r_.issues.size();
    const std::int64_t in = l.weight.size(1), out = l.weight.size(0);
    flag(l, "in_features", in);
    flag(l, "out_features", out);
    if (!measure_ || r_.issues.size() == first || !timed_dtype_) return;
    // The layer's GEMM as it is and with both sizes padded: the cost of its misalignment.
    const double ms = linear_ms(in, out, type_), padded_ms = linear_ms(pad(in), pad(out), type_);
    set_timing(first, ms, padded_ms, "64x" + std::to_string(in));
  }

  void check_conv(const jit_walk::Layer& l) {
    const std::size_t first = r_.issues.size();
    // A grouped convolution's channels are its totals: a depthwise one has a single input
    // channel per group, which no padding changes.
    const std::int64_t in = l.weight.size(1) * l.groups, out = l.weight.size(0);
    flag(l, "in_channels", in);
    flag(l, "out_channels", out);
    if (!measure_ || r_.issues.size() == first || !timed_dtype_) return;
    // The convolution as the forward called it, its channels as they are and padded.
    const ConvCall* call = call_of(l.weight);
    const std::string why = why_untimed(call);
    if (!why.empty()) {
      ++conv_untimed_;
      if (conv_untimed_why_.empty()) conv_untimed_why_ = why;
      return;
    }
    const double ms = conv_ms(*call, in, out, type_), padded_ms = conv_ms(*call, pad(in), pad(out), type_);
    set_timing(first, ms, padded_ms, dims_text(call->input));
  }

  // The forward's call of the convolution whose weight is `weight`; null when none was seen.
  const ConvCall* call_of(const at::Tensor& weight) const {
    if (!calls_) return nullptr;
    const auto it = calls_->find(weight.data_ptr());
    return it == calls_->end() ? nullptr : &it->second;
  }

  // Why the convolution called as `call` is not timed; "" when it is.
  std::string why_untimed(const ConvCall* call) const {
    if (!calls_) return "their cost depends on the image they are given: pass the model's inputs (report --input SHAPE)";
    if (call == nullptr) return "not called in the forward of the example inputs";
    if (call->transposed || call->groups != 1) return "grouped or transposed convolutions are not timed";
    return {};
  }

  AlignmentReport& r_;
  bool measure_;
  bool timed_dtype_;
  at::ScalarType type_;
  std::optional<std::map<const void*, ConvCall>> calls_;
  int conv_untimed_ = 0;
  std::string conv_untimed_why_;
};

}  // namespace

AlignmentReport check_alignment(const torch::jit::Module& module, const DeviceInfo& device, const std::string& dtype,
                                bool measure, const std::vector<at::Tensor>& example_inputs) {
  AlignmentReport r;
  r.device = device.id;
  r.dtype = dtype;
  r.multiple = stated_multiple(device, dtype);
  if (r.multiple <= 0) return r;

  jit_walk::FrozenCopy f = jit_walk::frozen_copy(module, c10::Device(c10::kCPU));
  const bool timed_dtype = dtype == "fp32" || dtype == "bf16";
  // The convolutions' calls in one forward of the example inputs (in fp32: the shapes are what
  // matters), when they are to be timed.
  std::optional<std::map<const void*, ConvCall>> calls;
  if (measure && timed_dtype && !example_inputs.empty()) calls = conv_calls(f.frozen, example_inputs);
  AlignmentCheck check(r, measure, std::move(calls));
  for (const jit_walk::Layer& l : jit_walk::weighted_layers(f, true)) check.check_layer(l);
  check.finish();
  return r;
}

AlignmentReport check_alignment(const Runtime& rt, const torch::jit::Module& module, const std::string& dtype,
                                bool measure, const std::vector<at::Tensor>& example_inputs) {
  return accelkit::check_alignment(module, rt.device_handle()->info(), dtype.empty() ? std::string(to_string(rt.precision().dtype)) : dtype,
                                   measure && rt.device().is_cpu(), example_inputs);
}

}  // namespace accelkit
