// accelkit monitor [--all] [--interval S] [--count N] [--csv | --json]: samples the selected
// device's Monitor until --count samples or Ctrl-C; --all samples every device the plugins
// list, including ones LibTorch here cannot train on (an AMD card beside a CPU-only LibTorch is
// still worth watching), one row per device per sample.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <thread>

#include "accelkit/context.hpp"
#include "accelkit/readings.hpp"
#include "accelkit/sdk/monitor.hpp"
#include "cli.hpp"
#include "format.hpp"
#include "json_out.hpp"
#include "table.hpp"

namespace accelkit::cli {
namespace {

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }

// Installs the handler for SIGINT/SIGTERM for its lifetime, then restores the old one.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

using Clock = std::chrono::steady_clock;

// Sleeps until `t` in short slices; false when a stop signal came first.
bool sleep_until(Clock::time_point t) {
  while (!g_stop) {
    const auto now = Clock::now();
    if (now >= t) return true;
    std::this_thread::sleep_for(std::min<Clock::duration>(t - now, std::chrono::milliseconds(50)));
  }
  return false;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Exact for integers (byte counts), three decimals otherwise.
std::string raw_number(double v) {
  return (std::floor(v) == v && std::fabs(v) < 1e15) ? fmt("%.0f", v) : fmt("%.3f", v);
}

std::string human_value(const Reading& r) {
  if (!r.value) return r.note.rfind("implausible", 0) == 0 ? "n/a (" + r.note + ")" : "n/a";
  if (r.unit == "bytes") return human_bytes(static_cast<std::uint64_t>(std::max(0.0, *r.value)));
  return fmt("%.1f", *r.value);
}

std::string header_for(const Reading& r) {
  if (r.unit.empty() || r.unit == "bytes") return r.key;
  return r.key + " (" + r.unit + ")";
}

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

const Reading* find(const std::vector<Reading>& rs, const std::string& key) {
  for (const auto& r : rs)
    if (r.key == key) return &r;
  return nullptr;
}

// One sample of one device as a JSON line.
std::string json_line(long long sample, double t, const std::string& device, const std::vector<Reading>& readings) {
  Json rs = Json::object();
  for (const auto& r : readings)
    rs[r.key] = Json{{"value", r.value ? Json(*r.value) : Json(nullptr)}, {"unit", r.unit}, {"source", r.source},
                     {"note", r.note}};
  Json line{{"sample", sample}, {"t", t}, {"time", utc_now()}, {"device", device}, {"readings", std::move(rs)}};
  return line.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// ",v1,v2,..." in the order of `keys`; n/a for a reading without a value or absent.
std::string csv_values(const std::vector<Reading>& readings, const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) {
    const Reading* r = find(readings, k);
    out += ',' + (r && r->value ? raw_number(*r->value) : std::string("n/a"));
  }
  return out;
}

// The table's cells, right-aligned to `widths`; `absent` for a key the device lacks.
std::string table_values(const std::vector<Reading>& readings, const std::vector<std::string>& keys,
                         const std::vector<std::size_t>& widths, const std::string& absent) {
  std::string line;
  for (std::size_t c = 0; c < keys.size(); ++c) {
    const Reading* r = find(readings, keys[c]);
    const std::string v = r ? human_value(*r) : absent;
    line += "  " + std::string(widths[c] > v.size() ? widths[c] - v.size() : 0, ' ') + v;
  }
  return line;
}

void print_notes(std::ostream& out, const std::map<std::string, std::string>& notes) {
  if (notes.empty()) return;
  out << "\nn/a:\n";
  for (const auto& [k, note] : notes) out << "  " << k << ": " << (note.rfind("n/a: ", 0) == 0 ? note.substr(5) : note) << '\n';
}

// --all: every candidate of the decision that opens and has a monitor; the others are listed
// with the reason. Columns: the union of every device's reading keys, in first-seen order.
int monitor_all(const Invocation& inv, const Context& ctx) {
  struct Watched {
    std::string id, name, why;
    std::shared_ptr<Device> device;  // keeps the plugin loaded
    std::shared_ptr<Monitor> monitor;
  };
  std::vector<Watched> devices;
  for (const Candidate& c : ctx.decision().candidates) {
    bool seen = false;
    for (const auto& w : devices) seen = seen || w.id == c.device.id;
    if (seen) continue;
    Watched w{c.device.id, c.device.name, "", nullptr, nullptr};
    try {
      w.device = ctx.open(c);
      auto m = w.device->monitor();
      if (m.ok() && m.value()) w.monitor = m.value();
      else w.why = "no monitor: " + (m.ok() ? std::string("the plugin returned none") : m.status().message());
    } catch (const std::exception& e) {
      w.why = e.what();
    }
    devices.push_back(std::move(w));
  }
  std::size_t watched = 0;
  for (const auto& w : devices) watched += w.monitor != nullptr;
  std::ostream& out = std::cout;
  if (!inv.json && !inv.csv) {
    out << "Monitoring " << watched << " device" << (watched == 1 ? "" : "s") << "  every " << inv.interval << " s"
        << (inv.count ? "" : "; Ctrl-C stops") << '\n';
    for (const auto& w : devices)
      out << "  " << w.id << "  " << w.name << (w.monitor ? "" : "  - not watched: " + w.why) << '\n';
    out << '\n';
  } else {
    for (const auto& w : devices)
      if (!w.monitor) std::cerr << "accelkit: " << w.id << " not watched: " << w.why << '\n';
  }
  if (watched == 0) {
    std::cerr << "accelkit: no device here has a monitor\n";
    return kExitFailure;
  }

  g_stop = 0;
  StopSignals signals;
  std::vector<std::string> keys;
  std::vector<std::size_t> widths;
  std::size_t id_width = 6;
  for (const auto& w : devices) id_width = std::max(id_width, w.id.size());
  std::map<std::string, std::string> notes;  // "<device> <key>" -> why n/a
  const auto start = Clock::now();
  const auto step = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(inv.interval));
  long long taken = 0;
  bool header = false;
  for (long long i = 0; !inv.count || i < *inv.count; ++i) {
    if (i > 0 && !sleep_until(start + step * i)) break;
    std::vector<std::pair<const Watched*, std::vector<Reading>>> rows;
    for (const auto& w : devices) {
      if (!w.monitor) continue;
      auto sample = w.monitor->sample();
      if (!sample.ok()) {
        notes[w.id + " sample"] = sample.status().message();
        continue;
      }
      std::vector<Reading> readings = sample.value();
      screen_readings(readings);
      for (const auto& r : readings) {
        if (std::find(keys.begin(), keys.end(), r.key) == keys.end() && !header) keys.push_back(r.key);
        if (!r.value) notes[w.id + " " + r.key] = r.note.empty() ? "n/a" : r.note;
        else notes.erase(w.id + " " + r.key);
      }
      rows.emplace_back(&w, std::move(readings));
    }
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    if (!header && !inv.json) {
      header = true;
      if (inv.csv) {
        out << "time_s,device";
        for (const auto& k : keys) out << ',' << k;
        out << '\n';
      } else {
        std::string line = "  time_s  device" + std::string(id_width - 6, ' ');
        for (const auto& k : keys) {
          widths.push_back(std::max<std::size_t>(k.size(), 10));
          line += "  " + std::string(widths.back() - k.size(), ' ') + k;
        }
        out << line << '\n';
      }
    }
    for (const auto& [w, readings] : rows) {
      if (inv.json)
        out << json_line(i, t, w->id, readings) << std::endl;
      else if (inv.csv)
        out << fmt("%.3f", t) << ',' << w->id << csv_values(readings, keys) << std::endl;
      else
        out << fmt("%8.1f", t) << "  " << w->id << std::string(id_width - w->id.size(), ' ')
            << table_values(readings, keys, widths, "-") << std::endl;
    }
    ++taken;
  }
  if (!inv.json && !inv.csv) print_notes(out, notes);
  out << std::flush;
  if (g_stop && !inv.json && !inv.csv) std::cerr << "accelkit: stopped after " << taken << " samples\n";
  return kExitOk;
}

}  // namespace

int verb_monitor(const Invocation& inv, const Context& ctx) {
  if (inv.all) return monitor_all(inv, ctx);
  const Decision& d = ctx.decision();
  if (!d.ok) return report_device_failure(ctx);
  const std::string id = d.selected->device.id;

  std::shared_ptr<Device> device;
  try {
    device = ctx.open_selected();
  } catch (const std::exception& e) {
    std::cerr << "accelkit: cannot open " << id << ": " << e.what() << '\n';
    return kExitFailure;
  }
  if (!device) {
    std::cerr << "accelkit: cannot open " << id << '\n';
    return kExitFailure;
  }
  auto monitor = device->monitor();
  if (!monitor.ok()) {
    std::cerr << "accelkit: " << id << " has no monitor: " << monitor.status().message() << '\n';
    return kExitFailure;
  }

  g_stop = 0;
  StopSignals signals;
  std::ostream& out = std::cout;
  std::vector<std::string> keys;        // columns, from the first sample
  std::vector<std::size_t> widths;      // table column widths
  std::map<std::string, std::string> notes;  // latest note of each n/a reading
  const auto start = Clock::now();
  const auto step = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(inv.interval));
  long long taken = 0;

  for (long long i = 0; !inv.count || i < *inv.count; ++i) {
    if (i > 0 && !sleep_until(start + step * i)) break;
    auto sample = monitor.value()->sample();
    if (sample.ok()) screen_readings(sample.value());
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    if (!sample.ok()) {
      std::cerr << "accelkit: sampling " << id << " failed: " << sample.status().message() << '\n';
      return kExitFailure;
    }
    const auto& readings = sample.value();
    if (i == 0) {
      for (const auto& r : readings) keys.push_back(r.key);
      if (inv.csv) {
        out << "time_s";
        for (const auto& k : keys) out << ',' << k;
        out << '\n';
      } else if (!inv.json) {
        out << "Monitoring " << id << "  " << d.selected->device.name << "  every " << inv.interval
            << " s" << (inv.count ? "" : "; Ctrl-C stops") << "\n";
        for (const auto& r : readings)
          if (!r.source.empty()) out << "  " << r.key << ": " << r.source << '\n';
        out << '\n';
        std::string line = "  time_s";
        for (const auto& r : readings) {
          const std::string h = header_for(r);
          widths.push_back(std::max<std::size_t>(h.size(), 10));
          line += "  " + std::string(widths.back() - h.size(), ' ') + h;
        }
        out << line << '\n';
      }
    }
    for (const auto& r : readings)
      if (!r.value) notes[r.key] = r.note.empty() ? "n/a" : r.note;
      else notes.erase(r.key);

    if (inv.json)
      out << json_line(i, t, id, readings) << std::endl;
    else if (inv.csv)
      out << fmt("%.3f", t) << csv_values(readings, keys) << std::endl;
    else
      out << fmt("%8.1f", t) << table_values(readings, keys, widths, "n/a") << std::endl;
    ++taken;
  }

  if (!inv.json && !inv.csv) print_notes(out, notes);
  out << std::flush;
  if (g_stop && !inv.json && !inv.csv) std::cerr << "accelkit: stopped after " << taken << " samples\n";
  return kExitOk;
}

}  // namespace accelkit::cli
