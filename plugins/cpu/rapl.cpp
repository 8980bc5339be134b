#include "rapl.hpp"

#include <cerrno>

#include <accelkit/sdk/host_paths.hpp>

namespace accelkit::cpu {

std::vector<RaplDomain> find_rapl_domains(const host::FileReader& read) {
  std::vector<RaplDomain> out;
  const std::string root = sysfs_path("class/powercap");
  for (const std::string& name : host::list_dir(root)) {
    const std::string prefix = "intel-rapl:";
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    if (name.find(':', prefix.size()) != std::string::npos) continue;  // sub-domain
    RaplDomain d;
    d.dir = root + "/" + name;
    d.name = host::read_line(read, d.dir + "/name").value_or(name);
    if (auto range = host::read_int(read, d.dir + "/max_energy_range_uj"); range && *range > 0)
      d.max_energy_range_uj = static_cast<std::uint64_t>(*range);
    // A domain without an energy counter file is not a power sensor; one whose file cannot be
    // read (EACCES: root-only; not a regular file) still is, and its readings say why.
    host::ReadResult r = read(d.dir + "/energy_uj");
    if (r.error != ENOENT && r.error != ENOTDIR) out.push_back(std::move(d));
  }
  return out;
}

std::optional<std::uint64_t> energy_delta_uj(std::uint64_t previous, std::uint64_t current,
                                             std::uint64_t max_energy_range_uj) {
  if (current >= previous) return current - previous;
  if (max_energy_range_uj == 0 || previous > max_energy_range_uj) return std::nullopt;
  // The counter restarts at 0 after max_energy_range_uj (the convention tools like powertop use).
  return (max_energy_range_uj - previous) + current;
}

RaplMeter::RaplMeter(std::vector<RaplDomain> domains, host::FileReader read)
    : domains_(std::move(domains)), read_(std::move(read)) {}

std::string RaplMeter::source() const {
  std::string out = "RAPL ";
  for (std::size_t i = 0; i < domains_.size(); ++i) out += (i ? "+" : "") + domains_[i].name;
  return out;
}

RaplMeter::Sample RaplMeter::read(Clock::time_point now) {
  Sample s;
  if (domains_.empty()) {
    s.note = "n/a: no RAPL powercap domain (class/powercap/intel-rapl:N)";
    return s;
  }
  std::vector<std::uint64_t> current;
  for (const RaplDomain& d : domains_) {
    const std::string path = d.dir + "/energy_uj";
    host::ReadResult r = read_(path);
    if (!r.ok()) {
      s.error = r.error;
      if (r.error == EACCES || r.error == EPERM)
        s.note = "n/a: permission denied reading " + path +
                 " (RAPL energy is root-only since Linux 5.10; run as root or grant read access)";
      else
        s.note = "n/a: cannot read " + path + ": " + host::failure(r);
      previous_.clear();
      previous_time_.reset();
      return s;
    }
    auto v = host::parse_int(r.text);
    if (!v || *v < 0) {
      s.note = "n/a: unreadable value in " + path;
      previous_.clear();
      previous_time_.reset();
      return s;
    }
    current.push_back(static_cast<std::uint64_t>(*v));
  }
  const bool first = !previous_time_ || previous_.size() != current.size();
  const double seconds =
      first ? 0.0 : std::chrono::duration<double>(now - *previous_time_).count();
  if (first) {
    s.note = "n/a: first sample (power is the energy delta between samples)";
  } else if (seconds <= 0.0) {
    s.note = "n/a: no time elapsed since the previous sample";
  } else {
    double joules = 0.0;
    for (std::size_t i = 0; i < current.size(); ++i) {
      auto delta = energy_delta_uj(previous_[i], current[i], domains_[i].max_energy_range_uj);
      if (!delta) {
        s.note = "n/a: " + domains_[i].name +
                 " energy counter went backwards and max_energy_range_uj is unknown";
        break;
      }
      joules += static_cast<double>(*delta) / 1e6;
    }
    if (s.note.empty()) s.watts = joules / seconds;
  }
  previous_ = std::move(current);
  previous_time_ = now;
  return s;
}

std::optional<double> RaplMeter::power_limit_w() const {
  double total = 0.0;
  for (const RaplDomain& d : domains_) {
    auto uw = host::read_int(read_, d.dir + "/constraint_0_power_limit_uw");
    if (!uw || *uw <= 0) return std::nullopt;
    total += static_cast<double>(*uw) / 1e6;
  }
  if (domains_.empty()) return std::nullopt;
  return total;
}

}  // namespace accelkit::cpu
