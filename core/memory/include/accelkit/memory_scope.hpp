// accelkit::MemoryScope: the peak and the change of a device's memory inside a region of a
// program, through the device's plugin (Device::memory(), Device::reset_peak_memory()):
//
//   {
//     accelkit::MemoryScope scope(*rt, "forward");
//     auto y = model->forward(x);
//     std::cout << scope.report().summary() << '\n';  // "forward: peak +1.2 GiB over the start, ..."
//   }
//
// In use is what the device's plugin counts: LibTorch's caching allocator's live tensors on a
// GPU, the process's resident set on the CPU (MemoryReport::source says which). The scope
// resets the device's peak when it starts; scopes nest (also across threads): an inner scope's
// reset first folds the peak so far into every scope open on the same device, so each still
// reports the peak of its whole region. A device that reports no memory gives a report with
// measured = false and the plugin's reason, never an error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "accelkit/sdk/device.hpp"

namespace accelkit {

class Runtime;

struct MemoryReport {
  std::string name;    // the scope's name
  std::string device;  // accelkit id, "cuda:0"
  bool measured = false;       // false: the device reports no memory (see note)
  bool peak_measured = false;  // false: no peak from the device (peak = max(start, end))
  std::uint64_t start = 0;     // in use when the scope began (bytes)
  std::uint64_t end = 0;       // in use now, or when the scope stopped
  std::uint64_t peak = 0;      // the most in use inside the scope
  std::string source;          // where the figures come from (the plugin's MemoryStats::source)
  std::string note;
  std::int64_t delta() const { return static_cast<std::int64_t>(end) - static_cast<std::int64_t>(start); }
  std::uint64_t peak_over_start() const { return peak > start ? peak - start : 0; }
  // One line for people: "step: peak +512.0 MiB over the start, +0 B at the end (LibTorch's ...)".
  std::string summary() const;
};

class MemoryScope {
 public:
  MemoryScope(std::shared_ptr<Device> device, std::string name = {});
  explicit MemoryScope(const Runtime& rt, std::string name = {});
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;
  ~MemoryScope();

  // The figures so far (the peak up to now), or the final ones after stop().
  MemoryReport report() const;
  // Ends the scope (later calls return the same report).
  MemoryReport stop();

  struct State;  // the implementation's

 private:
  std::shared_ptr<State> state_;
};

// "1.5 GiB", "512.0 MiB", "12 B": binary units, one decimal.
std::string format_bytes(std::uint64_t bytes);

}  // namespace accelkit
