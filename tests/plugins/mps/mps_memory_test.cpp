// The MPS plugin's memory figures (plugins/mps/mps_memory.cpp), built on every OS: LibTorch's
// MPS allocator figures as MemoryStats, and where LibTorch runs no MPS (Linux) the reason from
// every call, nothing thrown. On a Mac whose LibTorch runs MPS, a tensor's bytes show in in_use.
#include "torch_doctest.hpp"

#include <ATen/ops/empty.h>

#include "mps_memory.hpp"

using namespace accelkit;
using namespace accelkit::mps;

namespace {

constexpr std::uint64_t kGiB = 1ull << 30;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the figures as MemoryStats: Metal's working set as the total, available less what Metal holds") {
  const MemoryStats s = mps_memory_stats({1 * kGiB, 3 * kGiB, 21 * kGiB}, 32 * kGiB);
  CHECK(s.in_use == 1 * kGiB);
  CHECK(s.reserved == 3 * kGiB);
  CHECK(s.total == 21 * kGiB);
  CHECK(s.available == 18 * kGiB);
  CHECK_FALSE(s.peak);
  CHECK(s.source == "LibTorch's MPS allocator (getCurrentAllocatedMemory, getDriverAllocatedMemory, "
                    "getRecommendedMaxMemory)");
  CHECK(contains(s.note, "no peak"));

  // Metal holding more than it recommends (the allocator allows up to 1.7 times that): none left.
  const MemoryStats over = mps_memory_stats({20 * kGiB, 25 * kGiB, 21 * kGiB}, 32 * kGiB);
  CHECK(over.available == 0u);

  // A LibTorch without getRecommendedMaxMemory: hw.memsize as the total, available unknown.
  const MemoryStats no_recommended = mps_memory_stats({1 * kGiB, 3 * kGiB, std::nullopt}, 32 * kGiB);
  CHECK(no_recommended.total == 32 * kGiB);
  CHECK_FALSE(no_recommended.available);
  CHECK(contains(no_recommended.source, "sysctl hw.memsize"));
  CHECK(contains(no_recommended.note, "available unknown"));

  // The tensors' bytes only.
  const MemoryStats bare = mps_memory_stats({1 * kGiB, std::nullopt, std::nullopt}, 0);
  CHECK(bare.in_use == 1 * kGiB);
  CHECK_FALSE(bare.reserved);
  CHECK_FALSE(bare.total);
  CHECK_FALSE(bare.available);
  CHECK(bare.source == "LibTorch's MPS allocator (getCurrentAllocatedMemory)");
}

TEST_CASE("without MPS: memory(), empty_cache() and reset_peak_memory() say why and throw nothing") {
  if (compat::mps_available()) return;  // the next test case covers a LibTorch that runs MPS
#if !defined(__APPLE__)
  // Linux: LibTorch's default MPS hooks, whose allocator members throw.
  if (compat::mps_allocator_figures_available) CHECK_THROWS(compat::mps_allocator_figures());
#endif
  const Result<MemoryStats> m = read_mps_memory(32 * kGiB);
  REQUIRE_FALSE(m.ok());
  if (compat::mps_allocator_figures_available) {
    CHECK(m.status().code() == StatusCode::unavailable);
    CHECK_MESSAGE(contains(m.status().message(), "LibTorch here runs no MPS"), m.status().message());
  } else {
    CHECK(m.status().code() == StatusCode::not_supported);
    CHECK_MESSAGE(contains(m.status().message(), "no MPS allocator figures"), m.status().message());
  }
  CHECK_FALSE(mps_memory_available());

  const Status empty = empty_mps_cache();
  CHECK(empty.code() == (compat::mps_empty_cache_available ? StatusCode::unavailable : StatusCode::not_supported));
  CHECK_MESSAGE(contains(empty.message(), compat::mps_empty_cache_available ? "runs no MPS" : "no emptyCache()"),
                empty.message());

  const Status reset = reset_mps_peak();
  CHECK(reset.code() == StatusCode::not_supported);
  CHECK(contains(reset.message(), "no peak"));
}

TEST_CASE("with MPS: a tensor's bytes show in in_use; the cache empties") {
#if !defined(__APPLE__)
  CHECK_FALSE(compat::mps_available());  // MPS is Apple's: this LibTorch cannot run it
#endif
  if (!compat::mps_available()) return;
  REQUIRE(mps_memory_available());
  const Result<MemoryStats> before = read_mps_memory(0);
  REQUIRE_MESSAGE(before.ok(), before.status().message());
  REQUIRE(before.value().in_use);
  const at::Tensor t = at::empty({64 << 20}, at::TensorOptions().dtype(at::kByte).device(at::kMPS));
  const Result<MemoryStats> after = read_mps_memory(0);
  REQUIRE(after.ok());
  CHECK(*after.value().in_use >= *before.value().in_use + (64u << 20));
  CHECK(empty_mps_cache().is_ok());
}
