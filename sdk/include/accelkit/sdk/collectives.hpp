// Process groups a plugin makes for its device's tensors (Device::process_group), for
// data-parallel training.
//
// The host makes Gloo's groups itself: c10d's Gloo lives in libtorch_cpu, which every host
// links. A backend that lives in a library only the plugin links - NCCL in a CUDA LibTorch's
// libtorch_cuda, RCCL under the same name in a ROCm one, a vendor's own collective library -
// is made by the plugin, and the host drives it through c10d's ProcessGroup like any other
// (the gradient reducer, broadcasts, the loss scaler's flag).
//
// c10d's types are only named here, never included: a plugin that makes groups includes what
// it makes, and support/process_group.hpp converts between c10d's intrusive handle and the
// std::shared_ptr every object crossing the contract travels in.
#pragma once

#include <chrono>
#include <string>

namespace c10d {
class Store;
class ProcessGroup;
}  // namespace c10d

namespace accelkit {

struct CollectiveRequest {
  // One of the backends the device's "collectives" key offers (capability.hpp): "nccl".
  std::string backend;
  // The run's rendezvous store, already prefixed for this group. Borrowed for the call: a
  // group that keeps it takes its own reference (support::retain).
  c10d::Store* store = nullptr;
  int rank = 0;
  int world_size = 1;
  // The bound on every collective of the group (the `dist_timeout` setting).
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // This rank's device as LibTorch names it ("cuda:1"): the tensors the group will carry.
  std::string torch_device;
};

}  // namespace accelkit
