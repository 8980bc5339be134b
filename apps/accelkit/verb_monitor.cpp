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
#include <functional>
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

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The sampling both forms share: `take(i, start)` every --interval (sample i, `start` the time
// of the first) until --count samples or a stop signal; false from `take` is a failure it has
// reported (exit 1). Then, for the table, the notes of the readings still n/a, and after a stop
// signal how many samples were taken.
int run_samples(const Invocation& inv, const std::map<std::string, std::string>& notes,
                const std::function<bool(long long, Clock::time_point)>& take) {
  g_stop = 0;
  StopSignals signals;
  const auto start = Clock::now();
  const auto step = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(inv.interval));
  long long taken = 0;
  for (long long i = 0; !inv.count || i < *inv.count; ++i) {
    if (i > 0 && !sleep_until(start + step * i)) break;
    if (!take(i, start)) return kExitFailure;
    ++taken;
  }
  std::ostream& out = std::cout;
  if (!inv.json && !inv.csv) print_notes(out, notes);
  out << std::flush;
  if (g_stop && !inv.json && !inv.csv) std::cerr << "accelkit: stopped after " << taken << " samples\n";
  return kExitOk;
}

// The CSV header line: `first` (the leading columns), then the reading keys.
std::string csv_header(const std::string& first, const std::vector<std::string>& keys) {
  std::string line = first;
  for (const auto& k : keys) line += ',' + k;
  return line + '\n';
}

// The table's column heads, each right-aligned in a column at least 10 wide; the widths are
// appended to `widths` for the rows.
std::string header_cells(const std::vector<std::string>& heads, std::vector<std::size_t>& widths) {
  std::string line;
  for (const auto& h : heads) {
    widths.push_back(std::max<std::size_t>(h.size(), 10));
    line += "  " + std::string(widths.back() - h.size(), ' ') + h;
  }
  return line;
}

// A device --all lists: watched when it has a monitor, else `why` not.
struct WatchedDevice {
  std::string id, name, why;
  std::shared_ptr<Device> device;  // keeps the plugin loaded
  std::shared_ptr<Monitor> monitor;
};

// Every candidate of the decision once, opened, with its monitor or the reason it has none.
std::vector<WatchedDevice> open_watched(const Context& ctx) {
  std::vector<WatchedDevice> devices;
  for (const Candidate& c : ctx.decision().candidates) {
    bool seen = false;
    for (const auto& w : devices) seen = seen || w.id == c.device.id;
    if (seen) continue;
    WatchedDevice w{c.device.id, c.device.name, "", nullptr, nullptr};
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
  return devices;
}

// What --all watches: a list on stdout before the table; for --csv and --json, only the
// devices not watched, on stderr.
void list_watched(std::ostream& out, const Invocation& inv, const std::vector<WatchedDevice>& devices,
                  std::size_t watched) {
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
}

using WatchedReadings = std::vector<std::pair<const WatchedDevice*, std::vector<Reading>>>;

// One sample of every watched device. A key not seen before joins `keys` while `new_keys`;
// `notes` keeps why each "<device> <key>" is n/a now, and each failed sample.
WatchedReadings sample_watched(const std::vector<WatchedDevice>& devices, std::vector<std::string>& keys,
                               bool new_keys, std::map<std::string, std::string>& notes) {
  WatchedReadings rows;
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
      if (std::find(keys.begin(), keys.end(), r.key) == keys.end() && new_keys) keys.push_back(r.key);
      if (!r.value) notes[w.id + " " + r.key] = r.note.empty() ? "n/a" : r.note;
      else notes.erase(w.id + " " + r.key);
    }
    rows.emplace_back(&w, std::move(readings));
  }
  return rows;
}

// --all: every candidate of the decision that opens and has a monitor; the others are listed
// with the reason. Columns: the union of every device's reading keys, in first-seen order.
int monitor_all(const Invocation& inv, const Context& ctx) {
  const std::vector<WatchedDevice> devices = open_watched(ctx);
  std::size_t watched = 0;
  for (const auto& w : devices) watched += w.monitor != nullptr;
  std::ostream& out = std::cout;
  list_watched(out, inv, devices, watched);
  if (watched == 0) {
    std::cerr << "accelkit: no device here has a monitor\n";
    return kExitFailure;
  }

  std::vector<std::string> keys;
  std::vector<std::size_t> widths;
  std::size_t id_width = 6;
  for (const auto& w : devices) id_width = std::max(id_width, w.id.size());
  std::map<std::string, std::string> notes;  // "<device> <key>" -> why n/a
  bool header = false;
  return run_samples(inv, notes, [&](long long i, Clock::time_point start) {
    const WatchedReadings rows = sample_watched(devices, keys, !header, notes);
    const double t = seconds_since(start);
    if (!header && !inv.json) {
      header = true;
      if (inv.csv) out << csv_header("time_s,device", keys);
      else out << "  time_s  device" + std::string(id_width - 6, ' ') + header_cells(keys, widths) << '\n';
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
    return true;
  });
}

// The selected device's monitor, with the device that keeps its plugin loaded.
struct SelectedMonitor {
  std::shared_ptr<Device> device;
  std::shared_ptr<Monitor> monitor;
};

// Opens the selected device `id` and its monitor; the monitor is null after saying why.
SelectedMonitor open_selected_monitor(const Context& ctx, const std::string& id) {
  SelectedMonitor selected;
  try {
    selected.device = ctx.open_selected();
  } catch (const std::exception& e) {
    std::cerr << "accelkit: cannot open " << id << ": " << e.what() << '\n';
    return selected;
  }
  if (!selected.device) {
    std::cerr << "accelkit: cannot open " << id << '\n';
    return selected;
  }
  auto monitor = selected.device->monitor();
  if (!monitor.ok()) {
    std::cerr << "accelkit: " << id << " has no monitor: " << monitor.status().message() << '\n';
    return selected;
  }
  selected.monitor = monitor.value();
  return selected;
}

// The single device's header, from its first sample: the CSV line, or the table's title, the
// readings' sources and the column heads (their widths appended to `widths`); none for --json.
void print_device_header(std::ostream& out, const Invocation& inv, const DeviceInfo& info,
                         const std::vector<Reading>& readings, const std::vector<std::string>& keys,
                         std::vector<std::size_t>& widths) {
  if (inv.csv) {
    out << csv_header("time_s", keys);
  } else if (!inv.json) {
    out << "Monitoring " << info.id << "  " << info.name << "  every " << inv.interval << " s"
        << (inv.count ? "" : "; Ctrl-C stops") << "\n";
    for (const auto& r : readings)
      if (!r.source.empty()) out << "  " << r.key << ": " << r.source << '\n';
    out << '\n';
    std::vector<std::string> heads;
    for (const auto& r : readings) heads.push_back(header_for(r));
    out << "  time_s" + header_cells(heads, widths) << '\n';
  }
}

}  // namespace

int verb_monitor(const Invocation& inv, const Context& ctx) {
  if (inv.all) return monitor_all(inv, ctx);
  const Decision& d = ctx.decision();
  if (!d.ok) return report_device_failure(ctx);
  const std::string id = d.selected->device.id;
  const SelectedMonitor selected = open_selected_monitor(ctx, id);
  if (!selected.monitor) return kExitFailure;

  std::ostream& out = std::cout;
  std::vector<std::string> keys;        // columns, from the first sample
  std::vector<std::size_t> widths;      // table column widths
  std::map<std::string, std::string> notes;  // latest note of each n/a reading
  return run_samples(inv, notes, [&](long long i, Clock::time_point start) {
    auto sample = selected.monitor->sample();
    if (sample.ok()) screen_readings(sample.value());
    const double t = seconds_since(start);
    if (!sample.ok()) {
      std::cerr << "accelkit: sampling " << id << " failed: " << sample.status().message() << '\n';
      return false;
    }
    const auto& readings = sample.value();
    if (i == 0) {
      for (const auto& r : readings) keys.push_back(r.key);
      print_device_header(out, inv, d.selected->device, readings, keys, widths);
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
    return true;
  });
}

}  // namespace accelkit::cli
