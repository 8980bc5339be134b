// CachedDevice: the Device boilerplate of a backend that hands out one Precision and one
// Monitor per device - its DeviceInfo kept, and each object made on the first request, under
// one lock, with no exception escaping (guarded()) - so that a device writes only how to make
// them, and what else it offers.
//
//   class MyDevice final : public accelkit::support::CachedDevice {
//    public:
//     explicit MyDevice(DeviceInfo info) : CachedDevice("mine", std::move(info)) {}
//    private:
//     Result<std::shared_ptr<Precision>> make_precision() override;
//     Result<std::shared_ptr<Monitor>> make_monitor() override;
//   };
//
// Header-only; a plugin's own class between Device and its device, so the contract (Device)
// is unchanged. Thread-safety: precision() and monitor() may be called from any thread; the
// make_ functions run under the same lock, one at a time.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "accelkit/sdk/device.hpp"

namespace accelkit::support {

class CachedDevice : public Device {
 public:
  const DeviceInfo& info() const noexcept final { return info_; }

  Result<std::shared_ptr<Precision>> precision() noexcept final {
    return guarded(precision_label_.c_str(), [&] { return once(precision_, [&] { return make_precision(); }); });
  }

  Result<std::shared_ptr<Monitor>> monitor() noexcept final {
    return guarded(monitor_label_.c_str(), [&] { return once(monitor_, [&] { return make_monitor(); }); });
  }

 protected:
  // `name`: the plugin's name, for the messages of what a make_ function throws.
  CachedDevice(const std::string& name, DeviceInfo info)
      : info_(std::move(info)), precision_label_(name + " precision"), monitor_label_(name + " monitor") {}

  // This device's Precision, or why it has none (then asked again on the next request). May throw.
  virtual Result<std::shared_ptr<Precision>> make_precision() = 0;
  // This device's Monitor, or why it has none (then asked again on the next request). May throw.
  virtual Result<std::shared_ptr<Monitor>> make_monitor() = 0;

 private:
  // The object in `slot`, made by `make` when there is none yet.
  template <class T, class Make>
  Result<std::shared_ptr<T>> once(std::shared_ptr<T>& slot, Make make) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!slot) {
      Result<std::shared_ptr<T>> made = make();
      if (!made.ok()) return made;
      slot = std::move(made.value());
    }
    return slot;
  }

  DeviceInfo info_;
  std::string precision_label_, monitor_label_;
  std::mutex mutex_;
  std::shared_ptr<Precision> precision_;
  std::shared_ptr<Monitor> monitor_;
};

}  // namespace accelkit::support
