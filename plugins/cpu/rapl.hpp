// Package power from RAPL energy counters (class/powercap/intel-rapl:N; AMD kernels expose
// their RAPL there too). Power is the energy delta between two samples over the elapsed time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::cpu {

struct RaplDomain {
  std::string dir;   // .../class/powercap/intel-rapl:0
  std::string name;  // "package-0"
  std::uint64_t max_energy_range_uj = 0;  // counter wraps after this; 0 = unknown
};

// Top-level (package) domains; sub-domains (intel-rapl:0:0 = core, ...) are skipped because
// the package already contains them.
std::vector<RaplDomain> find_rapl_domains(const host::FileReader& read);

// Energy consumed between two counter values, handling one wrap; nullopt when the counter
// went backwards and the range is unknown.
std::optional<std::uint64_t> energy_delta_uj(std::uint64_t previous, std::uint64_t current,
                                             std::uint64_t max_energy_range_uj);

// Keeps the previous counters; each read() yields watts since the previous read().
class RaplMeter {
 public:
  using Clock = std::chrono::steady_clock;

  struct Sample {
    std::optional<double> watts;  // nullopt = n/a
    std::string note;             // why n/a
    int error = 0;                // errno of a failed read (EACCES: root-only counters)
  };

  RaplMeter(std::vector<RaplDomain> domains, host::FileReader read);

  bool empty() const noexcept { return domains_.empty(); }
  std::string source() const;  // "RAPL package-0+package-1"
  Sample read(Clock::time_point now);
  // The summed constraint_0 (long-term) power limit in watts, nullopt when not readable.
  std::optional<double> power_limit_w() const;

 private:
  std::vector<RaplDomain> domains_;
  host::FileReader read_;
  std::vector<std::uint64_t> previous_;
  std::optional<Clock::time_point> previous_time_;
};

}  // namespace accelkit::cpu
