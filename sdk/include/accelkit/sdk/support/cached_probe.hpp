// CachedProbePlugin: the Plugin boilerplate every backend writes - probe() and open() that
// never throw (guarded()), one lock, and the facts of the last probe kept for open() (probing
// first when the host opens without probing) - so that a plugin writes only what is its own:
// how to probe, and how to open device `index` from what the probe found.
//
//   struct Facts { MyProbe probe; MyReport report; };
//   class MyPlugin final : public accelkit::support::CachedProbePlugin<Facts> {
//    public:
//     static constexpr const char *kName = "mine", *kVersion = "0.1.0", *kDescription = "...";
//     MyPlugin() : CachedProbePlugin(kName) {}
//    private:
//     Probed run_probe() override { ... return {facts, report}; }
//     Result<std::shared_ptr<Device>> open_device(const Facts& f, std::size_t index) override;
//   };
//   ACCELKIT_PLUGIN(MyPlugin)
//
// Header-only. Thread-safety: probe() and open() may be called from any thread; both derived
// functions run under the same lock, one at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "accelkit/sdk/plugin.hpp"

namespace accelkit::support {

template <class Facts>
class CachedProbePlugin : public Plugin {
 public:
  Result<ProbeReport> probe() noexcept final {
    return guarded(probe_label_.c_str(), [&] {
      std::lock_guard<std::mutex> lock(mutex_);
      return refresh();
    });
  }

  Result<std::shared_ptr<Device>> open(std::size_t index) noexcept final {
    return guarded(open_label_.c_str(), [&]() -> Result<std::shared_ptr<Device>> {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!facts_) refresh();
      return open_device(*facts_, index);
    });
  }

 protected:
  // `name`: the plugin's name, for the messages of what a probe or open throws.
  explicit CachedProbePlugin(const std::string& name) : probe_label_(name + " probe"), open_label_(name + " open") {}

  struct Probed {
    Facts facts;         // what open_device() will need
    ProbeReport report;  // what the host sees
  };
  // Looks at the hardware. May throw: the host gets the message as an error Status.
  virtual Probed run_probe() = 0;
  // The device at `index` of the report made with `facts`. May throw.
  virtual Result<std::shared_ptr<Device>> open_device(const Facts& facts, std::size_t index) = 0;

 private:
  ProbeReport refresh() {
    Probed probed = run_probe();
    facts_ = std::move(probed.facts);
    return std::move(probed.report);
  }

  std::string probe_label_, open_label_;
  std::mutex mutex_;
  std::optional<Facts> facts_;
};

}  // namespace accelkit::support
