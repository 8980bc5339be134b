// c10d's ProcessGroup around one backend, across LibTorch versions (the light part of
// torch_compat_dist.hpp: ProcessGroup.hpp only, so the CUDA plugin's NCCL glue needs no Gloo).
// - 1.x: a backend (ProcessGroupGloo, ProcessGroupNCCL) *is* a c10d::ProcessGroup.
// - 2.x: a c10d::Backend that a c10d::ProcessGroup wraps, one backend per device type; the
//   ProcessGroup constructor took Options (naming the backend) until it took none.
// Told apart by the declarations themselves, not by version numbers.
#pragma once

#include <chrono>
#include <string>
#include <type_traits>
#include <utility>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace accelkit::compat {

namespace pg_detail {
template <typename T>
inline constexpr bool kAlwaysFalse = false;

template <typename G, typename = void>
struct HasSetDefaultBackend : std::false_type {};
template <typename G>
struct HasSetDefaultBackend<G, std::void_t<decltype(std::declval<G&>().setDefaultBackend(
                                   std::declval<typename G::BackendType>()))>> : std::true_type {};
}  // namespace pg_detail

// The process group of `backend` ("gloo" or "nccl"), made for `rank` of `size` over `store`,
// serving tensors of `device` (CPU for Gloo, CUDA for NCCL) and, on 2.x, made its default.
// (Templates only so that the branch this LibTorch lacks is never compiled.)
template <typename G = c10d::ProcessGroup, typename B>
c10::intrusive_ptr<G> as_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout, c10::intrusive_ptr<B> backend,
                                       c10::DeviceType device, const std::string& name) {
  if constexpr (std::is_base_of_v<G, B>) {
    (void)store, (void)rank, (void)size, (void)timeout, (void)device, (void)name;
    return backend;
  } else {
    c10::intrusive_ptr<G> group;
    if constexpr (std::is_constructible_v<G, c10::intrusive_ptr<c10d::Store>, int, int>) {
      group = c10::make_intrusive<G>(store, rank, size);
    } else {
      group = c10::make_intrusive<G>(store, rank, size, c10::make_intrusive<typename G::Options>(name, timeout));
    }
    const auto type = name == "nccl" ? G::BackendType::NCCL : G::BackendType::GLOO;
    group->setBackend(device, type, backend);
    if constexpr (pg_detail::HasSetDefaultBackend<G>::value) group->setDefaultBackend(type);
    return group;
  }
}

}  // namespace accelkit::compat
