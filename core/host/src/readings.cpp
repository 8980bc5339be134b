#include "accelkit/readings.hpp"

#include "accelkit/sdk/support/plausible.hpp"

namespace accelkit {

void screen_readings(std::vector<Reading>& readings) {
  for (Reading& r : readings) {
    if (!r.value) continue;
    if (std::string why = plausible::check(*r.value, r.unit); !why.empty()) {
      r.value.reset();
      r.note = std::move(why);
    }
  }
}

}  // namespace accelkit
