// For report_html_test.sh: writes <dir>/metrics.jsonl with known values through MetricsWriter
// (two segments: steps 1..40, then a resume from step 30 repeating 31..40 with other values and
// going on to 60; a loss over three decades with a NaN at step 9, guard events of each kind,
// memory in GiB, temperature and power), then <dir>/report.html with write_report_html.
// Usage: report_html_fixture <dir>
#include "accelkit/run_metrics.hpp"

#include <cmath>
#include <cstdint>
#include <exception>
#include <iostream>
#include <limits>
#include <string>

namespace {

accelkit::RunSegment segment(std::int64_t start_step) {
  accelkit::RunSegment r;
  r.device = "cpu (\"fixture\" <2 cores> & more)";
  r.model = "mlp 2x64";
  r.precision = "fp32";
  r.batch = 32;
  r.start_step = start_step;
  return r;
}

accelkit::StepMetrics step(std::int64_t s, double shift) {
  const auto x = static_cast<double>(s);
  accelkit::StepMetrics m;
  m.step = s;
  if (s % 2 == 1) m.loss = 3.0 * std::pow(10.0, -3.0 * x / 60) + shift;
  m.step_ms = 20.0 + std::fmod(x * 7.3, 5.0);
  m.samples_per_s = 32000.0 / m.step_ms;
  m.memory_bytes = (std::uint64_t(2) << 30) + static_cast<std::uint64_t>(s) * 12345678;
  m.temperature_c = 55.0 + x / 3.0 + shift;
  if (s > 5) m.power_w = 180.0 + std::fmod(x * 13.7, 40.0);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: report_html_fixture <dir>\n";
    return 2;
  }
  const std::string dir = argv[1];
  try {
    {
      accelkit::MetricsWriter w(dir, segment(0));
      for (std::int64_t s = 1; s <= 40; ++s) {
        accelkit::StepMetrics m = step(s, 0.0);
        if (s == 3) m.loss = 0.1 + 0.2;
        if (s == 9) m.loss = std::numeric_limits<double>::quiet_NaN();
        if (s == 20) m.events = {"warn: 91 C >= 90 C"};
        if (s == 25) m.events = {"pause 12.3 s: cooling below 85 C"};
        if (s == 35) m.events = {"stop: 96 C >= 95 C"};  // lost with the rest of this segment's 31..40
        w.write(m);
      }
    }
    {
      accelkit::MetricsWriter w(dir, segment(30));
      for (std::int64_t s = 31; s <= 60; ++s) {
        accelkit::StepMetrics m = step(s, 0.001);
        if (s == 50) m.events = {"warn: 90.5 C >= 90 C", "note: \"quoted\" <text>"};
        w.write(m);
      }
    }
    accelkit::write_report_html(dir + "/metrics.jsonl", dir + "/report.html");
  } catch (const std::exception& e) {
    std::cerr << "report_html_fixture: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
