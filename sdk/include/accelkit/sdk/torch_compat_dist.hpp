// PyTorch's distributed engine (c10d) across LibTorch versions: a Gloo process group and
// DistributedDataParallel's Reducer, driven from C++. Apart from torch_compat.hpp because its
// headers are heavy and only the data-parallel code needs them.
//
// The includer compiles with USE_C10D_GLOO defined and Gloo's headers on the include path
// (Debian's libgloo-dev): ProcessGroupGloo.hpp includes them, although only pointers to Gloo's
// types are held here, so the layout does not depend on which Gloo LibTorch was built with.
//
// What differs is told apart by the declarations themselves (which constructor exists), not
// by version numbers, because it changed more than once within 2.x:
// - 1.x: ProcessGroupGloo *is* a c10d::ProcessGroup; the Reducer takes per-bucket size limits.
// - 2.x: a c10d::Backend that a c10d::ProcessGroup wraps (one backend per device type; the
//   ProcessGroup constructor took Options until it took none); the Reducer dropped the limits
//   and later gained flags (unused-parameter skipping, the Python reducer, per-bucket caps:
//   2.13's reducer.hpp has all three).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "accelkit/sdk/torch_compat.hpp"
#include "accelkit/sdk/torch_compat_pg.hpp"

namespace accelkit::compat {


// A Gloo process group over `store` for `rank` of `size`, its collectives bounded by `timeout`,
// connecting through network interface `interface` ("eth0") if given, else the interface that
// `hostname` resolves to ("127.0.0.1": loopback), else the one this host's name resolves to.
// (Templates only so that the branch this LibTorch lacks is never compiled.)
template <typename G = c10d::ProcessGroup, typename Gloo = c10d::ProcessGroupGloo>
c10::intrusive_ptr<G> make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                      std::chrono::milliseconds timeout, const std::string& interface,
                                      const std::string& hostname) {
  auto options = Gloo::Options::create(timeout);
  options->devices.push_back(!interface.empty() ? Gloo::createDeviceForInterface(interface)
                             : !hostname.empty() ? Gloo::createDeviceForHostname(hostname)
                                                 : Gloo::createDefaultDevice());
  auto gloo = c10::make_intrusive<Gloo>(store, rank, size, options);
  return as_process_group<G>(store, rank, size, timeout, std::move(gloo), c10::DeviceType::CPU, "gloo");
}

// DistributedDataParallel's gradient reducer over `params` (all dense), buckets of at most
// `bucket_bytes` (the first bucket `first_bucket_bytes`, so the last layers' gradients leave
// early), assigned in reverse parameter order as backward produces them; the gradients become
// views of the buckets (no copy in or out). Also returns the number of buckets.
template <typename R = c10d::Reducer>
std::pair<std::unique_ptr<R>, std::size_t> make_reducer(const std::vector<at::Tensor>& params,
                                                        const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                                        std::int64_t bucket_bytes, std::int64_t first_bucket_bytes,
                                                        bool find_unused) {
  using Params = std::vector<at::Tensor>;
  using Buckets = std::vector<std::vector<std::size_t>>;
  using Limits = std::vector<std::size_t>;
  using Group = c10::intrusive_ptr<c10d::ProcessGroup>;
  using Sparse = std::vector<bool>;
  using Names = std::unordered_map<std::size_t, std::string>;
  std::vector<bool> sparse(params.size(), false);
  std::vector<std::int64_t> reversed;
  for (std::size_t i = params.size(); i-- > 0;) reversed.push_back(static_cast<std::int64_t>(i));
  auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
      params, {static_cast<std::size_t>(first_bucket_bytes), static_cast<std::size_t>(bucket_bytes)}, sparse,
      reversed);
  const std::size_t count = buckets.size();
  std::unique_ptr<R> r;
  const bool as_view = true;  // gradient_as_bucket_view
  if constexpr (std::is_constructible_v<R, Params, Buckets, Limits, Group, Sparse, std::int64_t, bool, bool, Names,
                                        std::int64_t>) {
    r = std::make_unique<R>(params, std::move(buckets), std::move(limits), group, sparse, bucket_bytes, find_unused,
                            as_view, Names{}, first_bucket_bytes);
  } else if constexpr (std::is_constructible_v<R, Params, Buckets, Group, Sparse, std::int64_t, bool, bool, Names,
                                               std::int64_t, bool, bool, std::vector<std::int64_t>>) {
    r = std::make_unique<R>(params, std::move(buckets), group, sparse, bucket_bytes, find_unused, as_view, Names{},
                            first_bucket_bytes, /*skip_all_reduce_unused_params=*/false,
                            /*use_python_reducer=*/false, std::vector<std::int64_t>{});
  } else if constexpr (std::is_constructible_v<R, Params, Buckets, Group, Sparse, std::int64_t, bool, bool, Names,
                                               std::int64_t, bool, bool>) {
    r = std::make_unique<R>(params, std::move(buckets), group, sparse, bucket_bytes, find_unused, as_view, Names{},
                            first_bucket_bytes, /*skip_all_reduce_unused_params=*/false,
                            /*use_python_reducer=*/false);
  } else if constexpr (std::is_constructible_v<R, Params, Buckets, Group, Sparse, std::int64_t, bool, bool, Names,
                                               std::int64_t, bool>) {
    r = std::make_unique<R>(params, std::move(buckets), group, sparse, bucket_bytes, find_unused, as_view, Names{},
                            first_bucket_bytes, /*skip_all_reduce_unused_params=*/false);
  } else if constexpr (std::is_constructible_v<R, Params, Buckets, Group, Sparse, std::int64_t, bool, bool, Names,
                                               std::int64_t>) {
    r = std::make_unique<R>(params, std::move(buckets), group, sparse, bucket_bytes, find_unused, as_view, Names{},
                            first_bucket_bytes);
  } else {
    static_assert(pg_detail::kAlwaysFalse<R>, "this LibTorch's c10d::Reducer constructor is not one accelkit knows");
  }
  (void)limits;
  return {std::move(r), count};
}

}  // namespace accelkit::compat
