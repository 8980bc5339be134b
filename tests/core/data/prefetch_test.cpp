// accelkit::Prefetcher: the same batches in the same order as without it, at every depth; the
// producer's exception at the batch it belongs to; destruction mid-epoch stops the thread; a
// torch::data DataLoader (with and without its own workers) through prefetch_loader.
#include "torch_doctest.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "accelkit/prefetch.hpp"
#include "test_support.hpp"

namespace prefetch_suite {

using accelkit::PrefetchOptions;
using accelkit::Prefetcher;

// Batch i of a seeded stream: its own generator, so it does not depend on who calls when.
std::pair<at::Tensor, at::Tensor> make_batch(std::uint64_t seed, std::int64_t i) {
  auto gen = at::detail::createCPUGenerator(seed + static_cast<std::uint64_t>(i));
  return {at::randn({4, 3}, gen), at::full({4}, static_cast<double>(i))};
}

TEST_CASE("the same batches in the same order as without prefetching, at every depth") {
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("ACCELKIT_TEST_SEED=" << seed);
  constexpr std::int64_t kBatches = 25;
  for (std::size_t depth : {0u, 1u, 2u, 5u}) {
    INFO("depth " << depth);
    std::int64_t produced = 0;
    Prefetcher<std::pair<at::Tensor, at::Tensor>> batches(
        [&]() -> std::optional<std::pair<at::Tensor, at::Tensor>> {
          if (produced == kBatches) return std::nullopt;
          return make_batch(seed, produced++);
        },
        PrefetchOptions{depth, std::nullopt});
    std::int64_t i = 0;
    while (auto b = batches.next()) {
      const auto expected = make_batch(seed, i);
      CHECK(torch::equal(b->first, expected.first));
      CHECK(torch::equal(b->second, expected.second));
      ++i;
    }
    CHECK(i == kBatches);
    CHECK_FALSE(batches.next().has_value());  // the end stays the end
    const accelkit::PrefetchStats s = batches.stats();
    CHECK(s.batches == static_cast<std::uint64_t>(kBatches));
    CHECK(s.waited_ms >= 0);
    CHECK(s.max_wait_ms <= s.waited_ms);
    CHECK(s.produce_ms > 0);
  }
}

TEST_CASE("the producer's exception comes out of next() at the batch it belongs to, then the end") {
  for (std::size_t depth : {0u, 3u}) {
    INFO("depth " << depth);
    int produced = 0;
    Prefetcher<at::Tensor> batches(
        [&]() -> std::optional<at::Tensor> {
          if (produced == 5) throw std::runtime_error("decode failed on sample 5");
          return at::full({1}, produced++);
        },
        PrefetchOptions{depth, std::nullopt});
    for (int i = 0; i < 5; ++i) {
      auto b = batches.next();
      REQUIRE(b.has_value());
      CHECK(b->item<int>() == i);
    }
    CHECK_THROWS_WITH(batches.next(), "decode failed on sample 5");
    CHECK_FALSE(batches.next().has_value());
  }
}

TEST_CASE("destroying the prefetcher mid-epoch stops its thread: nothing is produced afterwards") {
  std::atomic<int> produced{0};
  {
    Prefetcher<at::Tensor> batches(
        [&]() -> std::optional<at::Tensor> {  // endless
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          return at::full({1}, produced++);
        },
        PrefetchOptions{2, std::nullopt});
    for (int i = 0; i < 3; ++i) CHECK(batches.next()->item<int>() == i);
  }
  const int at_destruction = produced.load();
  CHECK(at_destruction <= 3 + 2 + 1);  // what was taken, the depth, one in progress
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(produced.load() == at_destruction);
}

TEST_CASE("a producer that never ends and a consumer that stops early: the queue holds depth batches") {
  std::atomic<int> produced{0};
  Prefetcher<at::Tensor> batches([&]() -> std::optional<at::Tensor> { return at::full({1}, produced++); },
                                 PrefetchOptions{4, std::nullopt});
  CHECK(batches.next()->item<int>() == 0);
  for (int spin = 0; spin < 200 && produced.load() < 5; ++spin) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(produced.load() == 5);  // the one taken + 4 ready, and no more
}

// Samples i = 0..n-1: (a seeded 2x5 tensor, i).
class Numbered : public torch::data::datasets::Dataset<Numbered> {
 public:
  Numbered(std::uint64_t seed, std::size_t n) : seed_(seed), n_(n) {}
  torch::data::Example<> get(std::size_t i) override {
    auto gen = at::detail::createCPUGenerator(seed_ + i);
    return {at::randn({2, 5}, gen), at::full({}, static_cast<std::int64_t>(i))};
  }
  torch::optional<std::size_t> size() const override { return n_; }

 private:
  std::uint64_t seed_;
  std::size_t n_;
};

TEST_CASE("a torch::data DataLoader through prefetch_loader: the batches it gives without prefetching") {
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("ACCELKIT_TEST_SEED=" << seed);
  for (std::size_t workers : {0u, 2u}) {
    INFO("loader workers " << workers);
    auto make = [&] {
      return torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Numbered(seed, 22).map(torch::data::transforms::Stack<>()),
          torch::data::DataLoaderOptions().batch_size(4).workers(workers).enforce_ordering(true));
    };
    std::vector<torch::data::Example<>> plain;
    {
      auto loader = make();
      for (auto& b : *loader) plain.push_back(b);
    }
    REQUIRE(plain.size() == 6);  // 5 of 4 and one of 2
    auto loader = make();
    auto batches = accelkit::prefetch_loader(*loader, PrefetchOptions{2, std::nullopt});
    std::size_t i = 0;
    while (auto b = batches.next()) {
      REQUIRE(i < plain.size());
      CHECK(torch::equal(b->data, plain[i].data));
      CHECK(torch::equal(b->target, plain[i].target));
      ++i;
    }
    CHECK(i == plain.size());
  }
}

TEST_CASE("a missing producer is refused") {
  CHECK_THROWS_AS(Prefetcher<at::Tensor>(nullptr, PrefetchOptions{}), std::invalid_argument);
}

}  // namespace prefetch_suite
