#include "accelkit/runtime/layout_watch.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

namespace accelkit::detail {

namespace {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (std::size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

// `shape` with its -1 replaced by what the other entries leave of `numel`.
std::vector<std::int64_t> resolve_shape(std::vector<std::int64_t> shape, std::int64_t numel) {
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw std::invalid_argument("more than one -1 in " + shape_text(shape));
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument("a negative size in " + shape_text(shape));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      throw std::invalid_argument(shape_text(shape) + " cannot hold " + std::to_string(numel) + " elements");
    shape[static_cast<std::size_t>(infer)] = numel / known;
  } else if (known != numel) {
    throw std::invalid_argument(shape_text(shape) + " cannot hold " + std::to_string(numel) + " elements");
  }
  return shape;
}

// One past the next dimension outside `k` whose size is not 1 (0: none).
std::size_t outer_dimension(const std::vector<std::int64_t>& sizes, std::size_t k) {
  while (k > 0 && sizes[k - 1] == 1) --k;
  return k;
}

}  // namespace

bool view_possible(const std::vector<std::int64_t>& sizes, const std::vector<std::int64_t>& strides,
                   std::vector<std::int64_t> shape) {
  if (sizes.size() != strides.size()) throw std::invalid_argument("sizes and strides differ in length");
  std::int64_t numel = 1;
  for (std::int64_t s : sizes) numel *= s;
  shape = resolve_shape(std::move(shape), numel);
  if (numel == 0) return true;
  // The tensor's dimensions fall into runs that are one block of memory each (a dimension's
  // stride is the next one's extent; dimensions of size 1 join any run). A view may split and
  // merge dimensions within a run, never across two: so, from the last dimension back, the new
  // shape's trailing sizes must multiply out to each run's elements exactly.
  std::size_t next = shape.size();  // the new shape's dimensions [next, end) are placed
  std::int64_t run_elems = 1;
  std::int64_t run_stride = 0;  // the stride of the run's innermost dimension; 0 before one
  for (std::size_t k = sizes.size(); k-- > 0;) {
    if (sizes[k] == 1) continue;
    if (run_stride == 0) run_stride = strides[k];
    run_elems *= sizes[k];
    // Does the run go on into the next dimension out (skipping size-1 ones)?
    const std::size_t j = outer_dimension(sizes, k);
    if (j > 0 && strides[j - 1] == run_elems * run_stride) continue;
    std::int64_t placed = 1;
    while (next > 0 && placed < run_elems) placed *= shape[--next];
    if (placed != run_elems) return false;
    run_elems = 1;
    run_stride = 0;
  }
  // What is left of the new shape can only be dimensions of size 1.
  return std::all_of(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(next),
                     [](std::int64_t d) { return d == 1; });
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
  if (finished_) return verdict_.value_or(Verdict{});
  finished_ = true;
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
  if (!finished_ && state_ != nullptr && state_->thread == std::this_thread::get_id()) finish();
}

}  // namespace accelkit::detail
