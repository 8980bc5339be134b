// c10d's process groups across the contract (collectives.hpp): c10d holds them through
// intrusive reference counts, the contract passes std::shared_ptr. Both directions keep the
// count right, so a group lives as long as either side holds it.
//
// Needs c10d's headers (a LibTorch built with distributed support; every build accelkit
// supports has them).
#pragma once

#include <memory>
#include <utility>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace accelkit::support {

// A group the plugin made, as Device::process_group returns it: the shared_ptr holds one
// c10d reference until its last copy goes.
template <typename G>
std::shared_ptr<c10d::ProcessGroup> share_group(c10::intrusive_ptr<G> group) {
  c10::intrusive_ptr<c10d::ProcessGroup> held(std::move(group));
  c10d::ProcessGroup* raw = held.get();
  return std::shared_ptr<c10d::ProcessGroup>(raw, [held](c10d::ProcessGroup*) mutable { held.reset(); });
}

// c10d's own handle to a group or store someone else owns: one more reference to it.
inline c10::intrusive_ptr<c10d::ProcessGroup> retain(const std::shared_ptr<c10d::ProcessGroup>& group) {
  return c10::intrusive_ptr<c10d::ProcessGroup>::unsafe_reclaim_from_nonowning(group.get());
}
inline c10::intrusive_ptr<c10d::Store> retain(c10d::Store* store) {
  return c10::intrusive_ptr<c10d::Store>::unsafe_reclaim_from_nonowning(store);
}

}  // namespace accelkit::support
