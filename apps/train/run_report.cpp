// report.html from a metrics log: the summary, the SVG plots and the events (run_metrics.hpp).
#include "accelkit/run_metrics.hpp"

#include "accelkit/atomic_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace accelkit::run_report {

namespace {

std::string esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

template <typename... Args>
std::string printf_text(const char* format, Args... args) {
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, format, args...);
  return std::string(buf, static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(sizeof buf) - 1)));
}

std::string exact(double v) { return printf_text("%.17g", v); }
std::string human(double v) { return printf_text("%.4g", v); }

std::string duration_text(double ms) {
  const double s = ms / 1000;
  if (s < 60) return printf_text("%.3g s", s);
  const auto total = static_cast<long long>(std::llround(s));
  if (total < 3600) return printf_text("%lld min %02lld s", total / 60, total % 60);
  return printf_text("%lld h %02lld min", total / 3600, total % 3600 / 60);
}

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = kMiB * 1024.0;

// The figure's geometry, in SVG user units (the page scales it to the column's width).
constexpr double kWidth = 560, kHeight = 240;
constexpr double kLeft = 74, kRight = 26, kTop = 12, kBottom = 38;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
constexpr std::size_t kDotsUpTo = 100;  // series this short also get a dot (with a tooltip) per point

struct Point {
  std::int64_t step;
  double value;      // in the series' unit (memory in bytes)
  std::string text;  // the value exactly as in metrics.jsonl
};

struct Series {
  std::string id;  // data-series, and the figure's id
  std::string title;
  std::string color;
  std::string unit;           // of the values as plotted; memory's is chosen by its range
  std::vector<Point> points;  // finite values only, in step order
  std::size_t non_finite = 0;
  std::int64_t first_non_finite = 0;
  bool from_zero = false;      // the y axis starts at 0 (all values >= 0)
  bool memory = false;         // bytes, shown in MiB or GiB
  bool log_scale = false;      // a log axis when the values span more than two decades
  bool when_measured = false;  // no plot at all when never measured (power)
};

struct Marker {
  std::int64_t step;
  std::string kind;  // warn, pause, stop, resume, event
  std::string title;
};

// The guard's event kind: the word before the first ':' or ' ', when it is one of the known ones.
std::string event_kind(const std::string& text) {
  const std::string word = text.substr(0, text.find_first_of(": "));
  for (const char* k : {"warn", "pause", "stop"})
    if (word == k) return k;
  return "event";
}

Series make_series(const MetricsLog& log, std::string id, std::string title, std::string color,
                   const std::function<std::optional<double>(const StepMetrics&)>& get) {
  Series s;
  s.id = std::move(id);
  s.title = std::move(title);
  s.color = std::move(color);
  for (const auto& m : log.steps) {
    auto v = get(m);
    if (!v) continue;
    if (!std::isfinite(*v)) {
      if (s.non_finite++ == 0) s.first_non_finite = m.step;
      continue;
    }
    s.points.push_back({m.step, *v, exact(*v)});
  }
  return s;
}

// Device memory: data-values are the recorded integers (bytes), not their double.
Series memory_series(const MetricsLog& log) {
  Series s;
  s.id = "memory";
  s.title = "Device memory";
  s.color = "#9467bd";
  s.from_zero = s.memory = true;
  for (const auto& m : log.steps) {
    if (!m.memory_bytes) continue;
    s.points.push_back({m.step, static_cast<double>(*m.memory_bytes), std::to_string(*m.memory_bytes)});
  }
  return s;
}

// Of a long series: the first, lowest, highest and last point of each of kReportBuckets runs.
std::vector<const Point*> plotted_points(const Series& s) {
  std::vector<const Point*> out;
  const std::size_t n = s.points.size();
  if (n <= kReportMaxPoints) {
    for (const auto& p : s.points) out.push_back(&p);
    return out;
  }
  for (std::size_t b = 0; b < kReportBuckets; ++b) {
    const std::size_t lo = n * b / kReportBuckets, hi = n * (b + 1) / kReportBuckets;
    if (lo == hi) continue;
    std::size_t lowest = lo, highest = lo;
    for (std::size_t i = lo; i < hi; ++i) {
      if (s.points[i].value < s.points[lowest].value) lowest = i;
      if (s.points[i].value > s.points[highest].value) highest = i;
    }
    std::size_t picks[] = {lo, lowest, highest, hi - 1};
    std::sort(std::begin(picks), std::end(picks));
    for (std::size_t i = 0; i < 4; ++i)
      if (i == 0 || picks[i] != picks[i - 1]) out.push_back(&s.points[picks[i]]);
  }
  return out;
}

// 1, 2 or 5 times a power of ten, near `raw` (> 0, finite).
double nice_step(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;  // a range too small for doubles to divide
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks;
  int decimals = 0;  // for linear tick labels
  double scale = 1;  // value / scale is what the ticks show (bytes -> MiB/GiB)

  // 0..1 along the axis of `t` in the axis' units (halves: no overflow for any finite range).
  double frac(double t) const {
    const double span = hi * 0.5 - lo * 0.5;
    const double f = (t * 0.5 - lo * 0.5) / span;
    return span > 0 && std::isfinite(f) ? f : 0.5;
  }
  double pos(double v) const { return frac(log ? std::log10(v) : v / scale); }
  std::string label(double t) const {
    if (log) return printf_text("%g", std::pow(10.0, t));
    if (t == 0) t = 0;  // not "-0"
    return std::abs(t) < 1e15 ? printf_text("%.*f", decimals, t) : printf_text("%.6g", t);
  }
};

// The multiples of `step` in [lo, hi], at most 50 (fewer where doubles cannot tell them apart).
std::vector<double> ticks_between(double lo, double hi, double step) {
  std::vector<double> out;
  const double first = std::ceil(lo / step);
  for (int i = 0; i < 50; ++i) {
    const double t = (first + i) * step;
    if (!(t <= hi + step * 1e-9)) break;
    if (out.empty() || t > out.back()) out.push_back(t);
  }
  return out;
}

// Widened to multiples of a 1-2-5 step, unless that leaves the doubles.
Axis linear_axis(double lo, double hi) {
  Axis a;
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.05;
    lo = std::max(lo - pad, -std::numeric_limits<double>::max());
    hi = std::min(hi + pad, std::numeric_limits<double>::max());
  }
  const double step = nice_step(hi / 5 - lo / 5);
  a.lo = std::floor(lo / step) * step;
  a.hi = std::ceil(hi / step) * step;
  if (!std::isfinite(a.lo)) a.lo = lo;
  if (!std::isfinite(a.hi)) a.hi = hi;
  a.decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step))), 0, 12);
  a.ticks = ticks_between(a.lo, a.hi, step);
  return a;
}

// The steps' axis, shared by every plot: exactly the recorded steps' range, integer ticks.
Axis step_axis(const MetricsLog& log) {
  Axis a;
  if (log.steps.empty()) return a;
  a.lo = static_cast<double>(log.steps.front().step);
  a.hi = static_cast<double>(log.steps.back().step);
  if (a.hi == a.lo) {
    a.lo -= 1;
    a.hi += 1;
  }
  a.ticks = ticks_between(a.lo, a.hi, std::max(1.0, std::round(nice_step((a.hi - a.lo) / 6))));
  return a;
}

Axis value_axis(const Series& s) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& p : s.points) {
    lo = std::min(lo, p.value);
    hi = std::max(hi, p.value);
  }
  if (s.log_scale && lo > 0 && hi / lo > 100) {
    Axis a;
    a.log = true;
    a.lo = std::floor(std::log10(lo));
    a.hi = std::ceil(std::log10(hi));
    const double every = std::max(1.0, std::ceil((a.hi - a.lo) / 8));
    for (double t = a.lo; t <= a.hi; t += every) a.ticks.push_back(t);
    return a;
  }
  double scale = 1;
  if (s.memory) scale = hi >= kGiB ? kGiB : kMiB;
  if (s.from_zero && lo >= 0) lo = 0;
  Axis a = linear_axis(lo / scale, hi / scale);
  a.scale = scale;
  return a;
}

std::string unit_of(const Series& s, const Axis& y) {
  if (!s.memory) return s.unit;
  return y.scale == kGiB ? "GiB" : "MiB";
}

std::string figure(const Series& s, const Axis& x, const std::vector<Marker>& markers) {
  std::ostringstream o;
  o << "<figure id=\"" << s.id << "\">\n";
  if (s.points.empty()) {
    o << "<figcaption>" << esc(s.title) << "</figcaption>\n<div class=\"na\">";
    if (s.non_finite)
      o << "n/a: no finite value (" << s.non_finite << " non-finite, the first at step " << s.first_non_finite << ")";
    else
      o << "n/a: not measured";
    o << "</div>\n</figure>\n";
    return o.str();
  }
  const Axis y = value_axis(s);
  auto px = [&](double step) { return printf_text("%.2f", kLeft + x.pos(step) * kPlotW); };
  auto py = [&](double v) { return printf_text("%.2f", kTop + (1 - y.pos(v)) * kPlotH); };
  auto py_tick = [&](double t) { return printf_text("%.2f", kTop + (1 - y.frac(t)) * kPlotH); };
  const std::string unit = unit_of(s, y);
  o << "<figcaption>" << esc(s.title) << (unit.empty() ? "" : " (" + esc(unit) + ")") << (y.log ? " (log scale)" : "");
  if (s.non_finite)
    o << " <span class=\"warning\">" << s.non_finite << " non-finite value" << (s.non_finite == 1 ? "" : "s")
      << " not plotted, the first at step " << s.first_non_finite << "</span>";
  o << "</figcaption>\n";
  o << "<svg viewBox=\"0 0 " << kWidth << " " << kHeight << "\" role=\"img\" aria-label=\"" << esc(s.title)
    << " over steps\">\n";
  o << "<rect class=\"frame\" x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kPlotW << "\" height=\""
    << kPlotH << "\"/>\n";
  o << "<g class=\"axis y\">\n";
  for (double t : y.ticks) {
    const std::string yy = py_tick(t);
    o << "<line class=\"grid\" x1=\"" << kLeft << "\" x2=\"" << kLeft + kPlotW << "\" y1=\"" << yy << "\" y2=\"" << yy
      << "\"/><text x=\"" << kLeft - 6 << "\" y=\"" << yy << "\" dy=\"0.35em\" text-anchor=\"end\">" << y.label(t)
      << "</text>\n";
  }
  o << "</g>\n<g class=\"axis x\">\n";
  for (double t : x.ticks) {
    const std::string xx = px(t);
    o << "<line class=\"tick\" x1=\"" << xx << "\" x2=\"" << xx << "\" y1=\"" << kTop + kPlotH << "\" y2=\""
      << kTop + kPlotH + 5 << "\"/><text x=\"" << xx << "\" y=\"" << kTop + kPlotH + 18
      << "\" text-anchor=\"middle\">" << x.label(t) << "</text>\n";
  }
  o << "<text class=\"label\" x=\"" << kLeft + kPlotW / 2 << "\" y=\"" << kHeight - 3
    << "\" text-anchor=\"middle\">step</text>\n</g>\n";
  o << "<text class=\"label\" transform=\"rotate(-90)\" x=\"" << -(kTop + kPlotH / 2) << "\" y=\"12\" "
    << "text-anchor=\"middle\">" << esc(unit.empty() ? s.id : unit) << "</text>\n";
  for (const auto& m : markers) {
    if (m.step < x.lo || m.step > x.hi) continue;
    const std::string xx = px(static_cast<double>(m.step));
    o << "<g class=\"marker " << m.kind << "\" data-step=\"" << m.step << "\"><title>" << esc(m.title)
      << "</title><line x1=\"" << xx << "\" x2=\"" << xx << "\" y1=\"" << kTop << "\" y2=\"" << kTop + kPlotH
      << "\"/></g>\n";
  }
  const auto pts = plotted_points(s);
  std::string coords, steps, values;
  for (const Point* p : pts) {
    if (!coords.empty()) {
      coords += ' ';
      steps += ' ';
      values += ' ';
    }
    coords += px(static_cast<double>(p->step)) + "," + py(p->value);
    steps += std::to_string(p->step);
    values += p->text;
  }
  o << "<polyline class=\"series\" stroke=\"" << s.color << "\" data-series=\"" << s.id << "\" data-steps=\"" << steps
    << "\" data-values=\"" << values << "\" points=\"" << coords << "\"/>\n";
  if (pts.size() <= kDotsUpTo) {
    o << "<g class=\"dots\" fill=\"" << s.color << "\">\n";
    for (const Point* p : pts) {
      const std::string shown = human(p->value / y.scale) + (unit.empty() ? "" : " " + unit);
      o << "<circle cx=\"" << px(static_cast<double>(p->step)) << "\" cy=\"" << py(p->value)
        << "\" r=\"2.5\"><title>step " << p->step << ": " << esc(shown) << "</title></circle>\n";
    }
    o << "</g>\n";
  }
  o << "</svg>\n</figure>\n";
  return o.str();
}

constexpr const char* kStyle = R"(body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:20px auto;
max-width:1180px;color:#222;background:#fff;padding:0 10px}
h1{font-size:1.4em;margin:0 0 8px}
h2{font-size:1.1em;margin:18px 0 6px}
table{border-collapse:collapse;font-size:.9em}
td,th{padding:2px 12px 2px 0;text-align:left;vertical-align:top}
th{color:#555;font-weight:600}
.warning{color:#a40}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:8px 20px}
figure{margin:0}
figcaption{font-weight:600;font-size:.95em;margin:6px 0 2px}
svg{width:100%;height:auto;display:block}
svg text{font-size:11px;fill:#444}
.frame{fill:none;stroke:#999;stroke-width:1}
.grid{stroke:#e4e4e4;stroke-width:1}
.tick{stroke:#999;stroke-width:1}
.series{fill:none;stroke-width:1.8;stroke-linejoin:round}
.marker line{stroke-width:1.5}
.marker.warn line{stroke:#e6a700;stroke-dasharray:4 3}
.marker.pause line{stroke:#17becf;stroke-dasharray:2 2}
.marker.stop line{stroke:#d62728}
.marker.resume line{stroke:#7f7f7f;stroke-dasharray:6 3}
.marker.event line{stroke:#8c564b;stroke-dasharray:1 3}
.kind{display:inline-block;width:1em;height:.7em;margin-right:4px}
.kind.warn{background:#e6a700}.kind.pause{background:#17becf}.kind.stop{background:#d62728}
.kind.resume{background:#7f7f7f}.kind.event{background:#8c564b}
.na{height:120px;border:1px dashed #bbb;display:flex;align-items:center;justify-content:center;color:#777}
)";

void summary(std::ostringstream& o, const MetricsLog& log) {
  o << "<table class=\"summary\">\n";
  auto row = [&](const std::string& k, const std::string& v) {
    o << "<tr><th>" << esc(k) << "</th><td>" << esc(v) << "</td></tr>\n";
  };
  const RunSegment* last = log.runs.empty() ? nullptr : &log.runs.back();
  const std::string na = "n/a: not recorded";
  row("device", last && !last->device.empty() ? last->device : na);
  row("model", last && !last->model.empty() ? last->model : na);
  row("precision", last && !last->precision.empty() ? last->precision : na);
  row("batch", last && last->batch > 0 ? std::to_string(last->batch) : na);
  if (log.steps.empty()) {
    row("steps", "none recorded");
  } else {
    row("steps", std::to_string(log.steps.front().step) + " to " + std::to_string(log.steps.back().step) + " (" +
                     std::to_string(log.steps.size()) + " recorded)");
  }
  row("started", !log.runs.empty() && !log.runs.front().time.empty() ? log.runs.front().time : na);
  double total_ms = 0;
  for (const auto& m : log.steps)
    if (std::isfinite(m.step_ms)) total_ms += m.step_ms;
  row("time in steps", log.steps.empty() ? na : duration_text(total_ms));
  const StepMetrics* final_loss = nullptr;
  for (const auto& m : log.steps)
    if (m.loss) final_loss = &m;
  row("final loss", final_loss ? human(*final_loss->loss) + " (step " + std::to_string(final_loss->step) + ")"
                               : std::string("n/a: not measured"));
  if (const std::size_t resumes = log.runs.empty() ? 0 : log.runs.size() - 1) {
    const std::string plural = resumes == 1 ? "" : "s";
    row("segments", std::to_string(resumes + 1) + " (" + std::to_string(resumes) + " resume" + plural + ")");
  }
  o << "</table>\n";
}

void segments_table(std::ostringstream& o, const MetricsLog& log) {
  if (log.runs.size() < 2) return;
  o << "<h2>Run segments</h2>\n<table class=\"segments\">\n"
    << "<tr><th>from step</th><th>started</th><th>device</th><th>model</th><th>precision</th><th>batch</th></tr>\n";
  for (const auto& r : log.runs)
    o << "<tr><td>" << r.start_step << "</td><td>" << esc(r.time) << "</td><td>" << esc(r.device) << "</td><td>"
      << esc(r.model) << "</td><td>" << esc(r.precision) << "</td><td>" << r.batch << "</td></tr>\n";
  o << "</table>\n";
}

void events_table(std::ostringstream& o, const std::vector<Marker>& markers) {
  if (markers.empty()) return;
  o << "<h2>Events</h2>\n<table class=\"events\">\n<tr><th>step</th><th>event</th></tr>\n";
  for (const auto& m : markers)
    o << "<tr><td>" << m.step << "</td><td><span class=\"kind " << m.kind << "\"></span>" << esc(m.title)
      << "</td></tr>\n";
  o << "</table>\n";
}

}  // namespace
}  // namespace accelkit::run_report

namespace accelkit {

std::string render_report_html(const MetricsLog& log) {
  using namespace run_report;
  std::vector<Marker> markers;
  for (std::size_t i = 1; i < log.runs.size(); ++i) {
    const auto& r = log.runs[i];
    markers.push_back({r.start_step, "resume", "resumed after step " + std::to_string(r.start_step) +
                                                   (r.device.empty() ? "" : " on " + r.device)});
  }
  for (const auto& m : log.steps)
    for (const auto& e : m.events) markers.push_back({m.step, event_kind(e), e});
  std::stable_sort(markers.begin(), markers.end(), [](const Marker& a, const Marker& b) { return a.step < b.step; });

  std::vector<Series> plots;
  plots.push_back(make_series(log, "loss", "Loss", "#1f77b4", [](const StepMetrics& m) { return m.loss; }));
  plots.back().log_scale = true;
  plots.push_back(make_series(log, "throughput", "Throughput", "#2ca02c",
                              [](const StepMetrics& m) { return std::optional<double>(m.samples_per_s); }));
  plots.back().unit = "samples/s";
  plots.back().from_zero = true;
  plots.push_back(memory_series(log));
  plots.push_back(make_series(log, "temperature", "Temperature", "#d62728",
                              [](const StepMetrics& m) { return m.temperature_c; }));
  plots.back().unit = "\xC2\xB0""C";
  plots.push_back(make_series(log, "power", "Power", "#ff7f0e", [](const StepMetrics& m) { return m.power_w; }));
  plots.back().unit = "W";
  plots.back().from_zero = plots.back().when_measured = true;

  const Axis x = step_axis(log);

  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<title>accelkit training run"
    << (log.runs.empty() || log.runs.back().model.empty() ? "" : ": " + esc(log.runs.back().model))
    << "</title>\n<style>\n" << kStyle << "</style>\n</head>\n<body>\n<h1>accelkit training run</h1>\n";
  summary(o, log);
  for (const auto& w : log.warnings) o << "<p class=\"warning\">" << esc(w) << "</p>\n";
  o << "<div class=\"plots\">\n";
  for (const auto& s : plots)
    if (!s.when_measured || !s.points.empty() || s.non_finite > 0) o << figure(s, x, markers);
  o << "</div>\n";
  events_table(o, markers);
  segments_table(o, log);
  o << "</body>\n</html>\n";
  return o.str();
}

void write_report_html(const std::string& metrics_path, const std::string& html_path) {
  write_file_atomically(html_path, render_report_html(read_metrics(metrics_path)));
}

}  // namespace accelkit
