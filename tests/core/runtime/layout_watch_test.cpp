// The channels-last watch (accelkit/runtime/layout_watch.hpp): its view check against
// LibTorch's own view() on random shapes and layouts, and what it finds in a step's operators.
#include <random>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "accelkit/runtime/layout_watch.hpp"

#include "torch_doctest.hpp"

namespace layout_watch_suite {

using accelkit::detail::channels_last_strides;
using accelkit::detail::ChannelsLastWatch;
using accelkit::detail::view_possible;

namespace {

// A random new shape for `numel` elements: a random factorisation, size-1 dimensions sprinkled
// in, sometimes one -1.
std::vector<std::int64_t> random_shape(std::int64_t numel, std::mt19937& rng) {
  std::vector<std::int64_t> shape;
  std::int64_t left = numel;
  while (left > 1) {
    std::vector<std::int64_t> divisors;
    for (std::int64_t d = 2; d <= left; ++d)
      if (left % d == 0) divisors.push_back(d);
    const std::int64_t d = divisors[std::uniform_int_distribution<std::size_t>(0, divisors.size() - 1)(rng)];
    // Take a few prime factors together now and then.
    shape.push_back(d);
    left /= d;
    if (rng() % 4 == 0) shape.push_back(1);
  }
  if (shape.empty()) shape.push_back(1);
  std::shuffle(shape.begin(), shape.end(), rng);
  if (rng() % 3 == 0) shape[rng() % shape.size()] = -1;
  return shape;
}

bool libtorch_views(const at::Tensor& t, const std::vector<std::int64_t>& shape) {
  try {
    (void)t.view(shape);
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

}  // namespace

TEST_CASE("view_possible agrees with LibTorch's view() on random shapes, contiguous and channels-last") {
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<std::int64_t> dim(1, 6);
  int checked = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::vector<std::int64_t> sizes{dim(rng), dim(rng), dim(rng), dim(rng)};
    for (const bool cl : {false, true}) {
      const at::Tensor t = torch::empty(sizes, torch::TensorOptions().memory_format(
                                                   cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous));
      const std::vector<std::int64_t> strides = t.strides().vec();
      if (cl) CHECK(strides == channels_last_strides(sizes));
      const std::vector<std::int64_t> shape = random_shape(t.numel(), rng);
      CAPTURE(sizes);
      CAPTURE(cl);
      CAPTURE(shape);
      const bool expected = libtorch_views(t, shape);
      CHECK(view_possible(sizes, strides, shape) == expected);
      ++checked;
      refused += expected ? 0 : 1;
    }
  }
  // Both answers came up often enough to mean something.
  CHECK(refused > 300);
  CHECK(checked - refused > 300);
  CHECK_THROWS_AS(view_possible({2, 3}, {3, 1}, {-1, -1}), std::invalid_argument);
  CHECK_THROWS_AS(view_possible({2, 3}, {3, 1}, {4, -1}), std::invalid_argument);
  CHECK_THROWS_AS(view_possible({2, 3}, {3, 1}, {5}), std::invalid_argument);
  CHECK(view_possible({0, 3}, {3, 1}, {3, 0}));
}

namespace {

torch::nn::Sequential conv_net() {
  return torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 6, 3).padding(1)),
                               torch::nn::BatchNorm2d(6), torch::nn::ReLU(),
                               torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 5, 3).stride(2).padding(1)));
}

// One training step the way a program writes it; `head` turns the 8x5x4x4 output into 8x80.
template <typename Head>
void one_step(torch::nn::Sequential& net, Head head) {
  const at::Tensor x = torch::randn({8, 3, 8, 8});
  const at::Tensor out = head(net->forward(x));
  torch::mse_loss(out, torch::zeros_like(out)).backward();
}

}  // namespace

TEST_CASE("the channels-last watch: a view() the program calls on a 4-D activation is unsafe; flatten(), "
          "reshape(), a view LibTorch calls itself and a view over 1x1 pixels are not") {
  torch::manual_seed(3);
  auto net = conv_net();
  SUBCASE("view() of a 4-D activation") {
    ChannelsLastWatch w;
    one_step(net, [](const at::Tensor& h) { return h.view({h.size(0), -1}); });
    const auto v = w.finish();
    CHECK_FALSE(v.safe);
    CHECK(v.why == "the program calls view([8, -1]) of a [8, 5, 4, 4] tensor, which fails on channels-last "
                   "activations (reshape() or flatten() would not)");
    // And LibTorch agrees: that view of the same activation channels-last throws.
    const at::Tensor h = net->forward(torch::randn({8, 3, 8, 8})).contiguous(at::MemoryFormat::ChannelsLast);
    CHECK_THROWS(h.view({8, -1}));
  }
  SUBCASE("flatten(), reshape() and a view over 1x1 pixels") {
    ChannelsLastWatch w;
    one_step(net, [](const at::Tensor& h) { return h.flatten(1); });
    one_step(net, [](const at::Tensor& h) { return h.reshape({h.size(0), -1}); });
    one_step(net, [](const at::Tensor& h) {
      return torch::adaptive_avg_pool2d(h, {1, 1}).view({h.size(0), -1}).repeat({1, 16});
    });
    // A view that keeps the channels-last order possible: split the batch.
    one_step(net, [](const at::Tensor& h) { return h.view({2, 4, 5, 4, 4}).reshape({8, 80}); });
    const auto v = w.finish();
    INFO(v.why);
    CHECK(v.safe);
    CHECK(v.why.find("no view() in the step watched") == 0);
  }
  SUBCASE("a step without a convolution tells nothing") {
    ChannelsLastWatch w;
    auto lin = torch::nn::Linear(4, 4);
    torch::mse_loss(lin->forward(torch::randn({2, 4})), torch::zeros({2, 4})).backward();
    const auto v = w.finish();
    CHECK_FALSE(v.safe);
    CHECK(v.why == "no convolution ran in the step watched");
  }
  SUBCASE("one watch per thread; finishing twice gives the same verdict") {
    ChannelsLastWatch first;
    ChannelsLastWatch second;
    one_step(net, [](const at::Tensor& h) { return h.flatten(1); });
    const auto s = second.finish();
    CHECK_FALSE(s.safe);
    CHECK(s.why == "another channels-last watch held this thread");
    const auto f = first.finish();
    CHECK(f.safe);
    CHECK(first.finish().why == f.why);
  }
  SUBCASE("after finish() nothing is watched any more") {
    {
      ChannelsLastWatch w;
      one_step(net, [](const at::Tensor& h) { return h.flatten(1); });
      CHECK(w.finish().safe);
    }
    ChannelsLastWatch next;  // the thread is free again
    one_step(net, [](const at::Tensor& h) { return h.view({h.size(0), -1}); });
    CHECK_FALSE(next.finish().safe);
  }
}

}  // namespace layout_watch_suite
