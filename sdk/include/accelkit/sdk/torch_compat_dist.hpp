// PyTorch's distributed engine (c10d) across LibTorch versions: a Gloo process group and
// DistributedDataParallel's Reducer, driven from C++. Apart from torch_compat.hpp because its
// headers are heavy and only the data-parallel code needs them.
//
// The includer compiles with USE_C10D_GLOO defined and Gloo's headers on the include path
// (Debian's libgloo-dev): ProcessGroupGloo.hpp includes them, although only pointers to Gloo's
// types are held here, so the layout does not depend on which Gloo LibTorch was built with.
//
// - 1.x: ProcessGroupGloo *is* a c10d::ProcessGroup; the Reducer takes per-bucket size limits.
// - 2.x: a c10d::Backend that a c10d::ProcessGroup wraps (one backend per device type); the
//   Reducer takes the Python-reducer and unused-parameter flags instead of the limits (checked
//   in 2.13's reducer.hpp).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "accelkit/sdk/torch_compat.hpp"

namespace accelkit::compat {

// A Gloo process group over `store` for `rank` of `size`, its collectives bounded by `timeout`,
// connecting through network interface `interface` ("eth0") if given, else the interface that
// `hostname` resolves to ("127.0.0.1": loopback), else the one this host's name resolves to.
inline c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                              int size, std::chrono::milliseconds timeout,
                                                              const std::string& interface,
                                                              const std::string& hostname) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(!interface.empty() ? c10d::ProcessGroupGloo::createDeviceForInterface(interface)
                             : !hostname.empty() ? c10d::ProcessGroupGloo::createDeviceForHostname(hostname)
                                                 : c10d::ProcessGroupGloo::createDefaultDevice());
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
#if ACCELKIT_TORCH_AT_LEAST(2, 0)
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, size);
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  return group;
#else
  return gloo;
#endif
}

// DistributedDataParallel's gradient reducer over `params` (all dense), buckets of at most
// `bucket_bytes` (the first bucket `first_bucket_bytes`, so the last layers' gradients leave
// early), assigned in reverse parameter order as backward produces them. Also returns the
// number of buckets.
inline std::pair<std::unique_ptr<c10d::Reducer>, std::size_t> make_reducer(const std::vector<at::Tensor>& params,
                                                   const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                                   std::int64_t bucket_bytes, std::int64_t first_bucket_bytes,
                                                   bool find_unused) {
  std::vector<bool> sparse(params.size(), false);
  std::vector<std::int64_t> reversed;
  for (std::size_t i = params.size(); i-- > 0;) reversed.push_back(static_cast<std::int64_t>(i));
  auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
      params, {static_cast<std::size_t>(first_bucket_bytes), static_cast<std::size_t>(bucket_bytes)}, sparse,
      reversed);
  const std::size_t count = buckets.size();
#if ACCELKIT_TORCH_AT_LEAST(2, 0)
  (void)limits;
  return {std::make_unique<c10d::Reducer>(params, std::move(buckets), group, sparse, bucket_bytes, find_unused,
                                         /*gradient_as_bucket_view=*/true,
                                         std::unordered_map<std::size_t, std::string>{}, first_bucket_bytes,
                                         /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
                                         std::vector<std::int64_t>{}),
          count};
#else
  return {std::make_unique<c10d::Reducer>(params, std::move(buckets), std::move(limits), group, sparse, bucket_bytes,
                                          find_unused, /*gradient_as_bucket_view=*/true,
                                          std::unordered_map<std::size_t, std::string>{}, first_bucket_bytes),
          count};
#endif
}

}  // namespace accelkit::compat
