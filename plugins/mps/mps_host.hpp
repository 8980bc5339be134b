// What macOS reports: chip, model, OS version and memory (sysctl), and thermal pressure
// (the notify(3) key com.apple.system.thermalpressurelevel). Apple platforms only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace accelkit::mps {

std::string sysctl_string(const char* name);  // "" when absent
std::uint64_t sysctl_u64(const char* name);   // 0 when absent

// 0 nominal, 1 moderate, 2 heavy, 3 trapping, 4 sleeping; nullopt when unreadable.
std::optional<int> thermal_pressure_level();
const char* thermal_pressure_name(int level);

}  // namespace accelkit::mps
