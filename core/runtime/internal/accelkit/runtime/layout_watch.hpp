// Whether a program's steps survive channels-last activations, judged on one of its own steps
// before step tuning offers channels-last weights (channels_last = auto).
//
// A convolution whose weight is channels-last returns a channels-last output, and so do the
// layers after it; the values are the same, only the strides differ. What breaks is a
// program that view()s such a tensor into a shape its strides cannot give
// (pytorch/examples' MNIST: x.view({-1, 320}) on a 64x20x4x4 activation), which throws
// "view size is not compatible with input tensor's size and stride". reshape() and flatten()
// copy where they must, and work.
//
// The watch follows this thread's operators through LibTorch's RecordFunction (the profiler's
// hook) from the first training step's start to its end, and looks at every aten::view the
// program itself calls (one no other operator is running - a flatten()'s own view inside
// reshape, or one inside a backward function, is LibTorch's, which copes with any layout): a
// 4-D tensor with more than one channel and more than one pixel, viewed into a shape its
// channels-last strides could not be viewed as, is the verdict "not safe". So is a step in
// which no convolution ran (nothing was seen, so nothing is known).
//
// What it cannot see: a program that reads an activation's memory through data_ptr() assuming
// contiguous rows. channels_last = off keeps such a program's layout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accelkit::detail {

// Whether `sizes` (row-major, strides `strides`) can be viewed as `shape` (one entry may be -1)
// without a copy: LibTorch's own check (at::detail::computeStride, what view() asks). Throws
// std::invalid_argument where `shape` cannot hold the elements at all.
bool view_possible(const std::vector<std::int64_t>& sizes, const std::vector<std::int64_t>& strides,
                   const std::vector<std::int64_t>& shape);

// The strides of a 4-D tensor of `sizes` in the channels-last layout (NHWC in memory).
std::vector<std::int64_t> channels_last_strides(const std::vector<std::int64_t>& sizes);

class ChannelsLastWatch {
 public:
  // Watches this thread's operators from here; one watch per thread at a time (a second one
  // watches nothing and says so).
  ChannelsLastWatch();
  ~ChannelsLastWatch();
  ChannelsLastWatch(const ChannelsLastWatch&) = delete;
  ChannelsLastWatch& operator=(const ChannelsLastWatch&) = delete;

  struct Verdict {
    bool safe = false;
    std::string why;  // what it saw: the view that would fail, or why nothing is known
  };
  // Stops watching (on the thread that started it) and says what it saw.
  Verdict finish();

  struct State;  // what the thread's operators showed so far (layout_watch.cpp)

 private:
  State* state_ = nullptr;  // null: another watch held this thread
  std::uint64_t handle_ = 0;
  std::optional<Verdict> verdict_;  // once finished
};

}  // namespace accelkit::detail
