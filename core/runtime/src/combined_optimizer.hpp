// The negotiated device's own AdamW implementations together with those other plugins
// contribute to it (Plugin::optimizer_for: "replace one interface"), as one Optimizer. The
// contributed ones are listed after the device's own as "<plugin>.<name>"; the AdamW choice
// then measures them all like any other set of implementations.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accelkit/loader.hpp"
#include "accelkit/sdk/optimizer.hpp"

namespace accelkit {

struct OptimizerContribution {
  std::string plugin;                   // the contributing plugin's name
  std::shared_ptr<Optimizer> optimizer;  // never null
};

// What the loaded plugins other than `device_plugin` contribute to `device`, in discovery
// order; one line per plugin that declined or failed goes to *declined (for the log).
std::vector<OptimizerContribution> collect_optimizer_contributions(const Discovery& discovery,
                                                                   const std::string& device_plugin,
                                                                   const DeviceInfo& device,
                                                                   std::vector<std::string>* declined);

// `own` (may be null: the device has no optimizer) and the contributions (at least one).
std::shared_ptr<Optimizer> combine_optimizers(std::shared_ptr<Optimizer> own,
                                              std::vector<OptimizerContribution> contributed);

}  // namespace accelkit
