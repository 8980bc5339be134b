// Waiting for a device's queued work, without any vendor header in the core.
#pragma once

#include <ATen/ATen.h>

namespace accelkit::detail {

// CPU ops complete before they return. Other devices (cuda, hip, mps, xpu) queue work: a
// blocking one-element copy to the host, queued after all of it on the current stream, waits
// as a device synchronise would for single-stream work.
inline void synchronize(const c10::Device& device) {
  if (device.is_cpu()) return;
  (void)at::zeros({1}, at::TensorOptions().device(device)).cpu();
}

}  // namespace accelkit::detail
