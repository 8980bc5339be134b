#include "accelkit/runtime/layout_watch.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <ATen/InferSize.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

namespace accelkit::detail {

namespace {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::ostringstream o;
  o << c10::IntArrayRef(s);  // "[64, 20, 4, 4]"
  return o.str();
}

}  // namespace

bool view_possible(const std::vector<std::int64_t>& sizes, const std::vector<std::int64_t>& strides,
                   const std::vector<std::int64_t>& shape) {
  if (sizes.size() != strides.size()) throw std::invalid_argument("sizes and strides differ in length");
  std::int64_t numel = 1;
  for (std::int64_t s : sizes) numel *= s;
  std::vector<std::int64_t> resolved;
  try {
    resolved = at::infer_size(shape, numel);
  } catch (const c10::Error& e) {
    throw std::invalid_argument(e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw std::invalid_argument(e.what());
  }
  // LibTorch's own test, the one view() makes: strides for the new shape, or none.
  return at::detail::computeStride(at::IntArrayRef(sizes), at::IntArrayRef(strides), at::IntArrayRef(resolved))
      .has_value();
}

std::vector<std::int64_t> channels_last_strides(const std::vector<std::int64_t>& sizes) {
  if (sizes.size() != 4) throw std::invalid_argument("channels-last strides are for 4-D sizes");
  const std::int64_t c = std::max<std::int64_t>(sizes[1], 1), h = std::max<std::int64_t>(sizes[2], 1),
                     w = std::max<std::int64_t>(sizes[3], 1);
  return {h * w * c, 1, w * c, c};
}

struct ChannelsLastWatch::State {
  std::thread::id thread = std::this_thread::get_id();
  int depth = 0;              // operators running on this thread (the program's own are at 0)
  std::int64_t operators = 0;  // seen in all
  bool convolution = false;   // a convolution ran
  std::string unsafe;         // the first view that would fail, described
};

namespace {

thread_local ChannelsLastWatch::State* tl_watch = nullptr;

bool is_convolution(const char* name) {
  return std::strcmp(name, "aten::convolution") == 0 || std::strcmp(name, "aten::_convolution") == 0 ||
         std::strcmp(name, "aten::conv2d") == 0 || std::strcmp(name, "aten::conv_transpose2d") == 0;
}

// The new shape a view's second argument gives (a list of ints, or of symbolic ints that are
// ints here); nullopt where it is not one (view(dtype)).
std::optional<std::vector<std::int64_t>> view_shape(const c10::IValue& v) {
  if (v.isIntList()) return v.toIntVector();
  if (!v.isList()) return std::nullopt;
  std::vector<std::int64_t> out;
  for (const c10::IValue& e : v.toListRef()) {
    if (e.isInt()) out.push_back(e.toInt());
    else if (e.isSymInt()) out.push_back(e.toSymInt().expect_int());
    else return std::nullopt;
  }
  return out;
}

// A view the program called on `self`: what fails on channels-last strides, or "".
std::string failing_view(const at::Tensor& self, const c10::IValue& arg) {
  if (!self.defined() || self.dim() != 4 || self.is_contiguous(at::MemoryFormat::ChannelsLast)) return {};
  const std::vector<std::int64_t> sizes = self.sizes().vec();
  if (sizes[1] <= 1 || sizes[2] * sizes[3] <= 1) return {};  // its strides are the same either way
  const std::optional<std::vector<std::int64_t>> shape = view_shape(arg);
  if (!shape) {
    // view(dtype): another element size needs the last dimension's stride to be 1.
    if (arg.isInt() &&
        static_cast<std::int64_t>(c10::elementSize(static_cast<c10::ScalarType>(arg.toInt()))) != self.element_size())
      return "a view of a " + shape_text(sizes) + " tensor as another dtype";
    return {};
  }
  try {
    if (view_possible(sizes, channels_last_strides(sizes), *shape)) return {};
  } catch (const std::invalid_argument&) {
    return {};  // LibTorch refuses that view in any layout: not the layout's doing
  }
  return "view(" + shape_text(*shape) + ") of a " + shape_text(sizes) + " tensor";
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  ChannelsLastWatch::State* w = tl_watch;
  if (w == nullptr) return nullptr;
  const char* name = fn.name();
  ++w->operators;
  if (w->depth++ > 0 || name == nullptr) return nullptr;
  if (!w->convolution && is_convolution(name)) w->convolution = true;
  if (w->unsafe.empty() && std::strcmp(name, "aten::view") == 0) {
    const auto in = fn.inputs();
    if (in.size() >= 2 && in[0].isTensor()) w->unsafe = failing_view(in[0].toTensor(), in[1]);
  }
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {
  if (ChannelsLastWatch::State* w = tl_watch; w != nullptr && w->depth > 0) --w->depth;
}

}  // namespace

ChannelsLastWatch::ChannelsLastWatch() {
  if (tl_watch != nullptr) return;  // another watch holds this thread
  state_ = new State;
  tl_watch = state_;
  // A backward function counts as an operator running: what runs inside it is LibTorch's.
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end)
                                           .needsInputs(true)
                                           .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

ChannelsLastWatch::Verdict ChannelsLastWatch::finish() {
  if (verdict_) return *verdict_;
  Verdict v;
  if (state_ == nullptr) {
    v.why = "another channels-last watch held this thread";
    verdict_ = v;
    return v;
  }
  if (state_->thread != std::this_thread::get_id()) {
    // The callback is this watch's thread's; it reads nothing once the state is gone there.
    v.why = "the training step began on another thread than the one watched";
    verdict_ = v;
    return v;
  }
  at::removeCallback(handle_);
  tl_watch = nullptr;
  if (!state_->unsafe.empty()) {
    v.why = "the program calls " + state_->unsafe +
            ", which fails on channels-last activations (reshape() or flatten() would not)";
  } else if (state_->operators == 0) {
    v.why = "no operator of the step was seen (this LibTorch runs no RecordFunction callbacks)";
  } else if (!state_->convolution) {
    v.why = "no convolution ran in the step watched";
  } else {
    v.safe = true;
    v.why = "no view() in the step watched (" + std::to_string(state_->operators) +
            " operators) would fail on channels-last activations";
  }
  delete state_;
  state_ = nullptr;
  verdict_ = v;
  return v;
}

ChannelsLastWatch::~ChannelsLastWatch() {
  if (!verdict_ && state_ != nullptr && state_->thread == std::this_thread::get_id()) finish();
}

}  // namespace accelkit::detail
