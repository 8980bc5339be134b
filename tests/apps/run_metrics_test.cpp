// A run's metrics.jsonl and report.html (run_metrics.hpp): writer -> reader bit for bit (random
// doubles, non-finite values, nulls, escapes, events), resumed runs repeating steps, a torn last
// line against a malformed one in the middle, the writer repairing a crash's torn line, and the
// report's plotted values (its polylines' data attributes) against the records.
#include "accelkit/run_metrics.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace run_metrics_suite {

using namespace accelkit;
using accelkit::test::contains;
using accelkit::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::uint64_t bits(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Equal bit for bit (NaN included: the writer keeps no NaN payload, so any NaN equals any NaN).
bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || bits(a) == bits(b); }
bool same(const std::optional<double>& a, const std::optional<double>& b) {
  return a.has_value() == b.has_value() && (!a || same(*a, *b));
}

void check_same(const StepMetrics& a, const StepMetrics& b) {
  INFO("step " << a.step);
  CHECK(a.step == b.step);
  CHECK(same(a.loss, b.loss));
  CHECK(same(a.step_ms, b.step_ms));
  CHECK(same(a.samples_per_s, b.samples_per_s));
  CHECK(a.memory_bytes == b.memory_bytes);
  CHECK(same(a.temperature_c, b.temperature_c));
  CHECK(same(a.power_w, b.power_w));
  CHECK(a.events == b.events);
}

::mode_t current_umask() {
  const ::mode_t m = ::umask(0);
  ::umask(m);
  return m;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void append_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::app);
  out << text;
}

// A double from random bits: any finite value, subnormals included.
double random_double(std::mt19937_64& rng) {
  for (;;) {
    const std::uint64_t b = rng();
    double v;
    std::memcpy(&v, &b, sizeof v);
    if (std::isfinite(v)) return v;
  }
}

RunSegment segment(std::int64_t start_step) {
  RunSegment r;
  r.device = "cpu (\"Xeon\" \\ 2 cores)";
  r.model = "mlp 4x1024";
  r.precision = "bf16 autocast";
  r.batch = 64;
  r.start_step = start_step;
  r.time = "2025-01-31T12:00:00Z";
  return r;
}

StepMetrics plain_step(std::int64_t step, double loss) {
  StepMetrics m;
  m.step = step;
  m.loss = loss;
  m.step_ms = 10.0 + static_cast<double>(step);
  m.samples_per_s = 6400.0 / m.step_ms;
  m.memory_bytes = std::uint64_t(1) << 30;
  m.temperature_c = 60.5;
  return m;
}

// The value of attribute `name` of the element that carries `key` (e.g. data-series="loss").
std::optional<std::string> attribute(const std::string& html, const std::string& key, const std::string& name) {
  const auto at = html.find(key);
  if (at == std::string::npos) return std::nullopt;
  const auto open = html.rfind('<', at);
  const auto close = html.find('>', at);
  const std::string element = html.substr(open, close - open);
  const auto a = element.find(" " + name + "=\"");
  if (a == std::string::npos) return std::nullopt;
  const auto from = a + name.size() + 3;
  return element.substr(from, element.find('"', from) - from);
}

std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

struct Plotted {
  std::vector<std::int64_t> steps;
  std::vector<std::string> values;
};

Plotted plotted(const std::string& html, const std::string& series) {
  const std::string key = "data-series=\"" + series + "\"";
  auto steps = attribute(html, key, "data-steps");
  auto values = attribute(html, key, "data-values");
  REQUIRE_MESSAGE(steps, "no polyline for " << series);
  REQUIRE(values);
  Plotted p;
  for (const auto& t : split(*steps)) p.steps.push_back(std::stoll(t));
  p.values = split(*values);
  REQUIRE(p.steps.size() == p.values.size());
  return p;
}

// The <figure id="..."> element's text.
std::string figure_of(const std::string& html, const std::string& id) {
  const auto at = html.find("<figure id=\"" + id + "\">");
  if (at == std::string::npos) return {};
  return html.substr(at, html.find("</figure>", at) - at);
}

// Every coordinate of the page's SVG is a finite number (no "nan", no "inf").
void check_coordinates(const std::string& html) {
  std::size_t count = 0;
  for (const char* name :
       {" points=\"", " cx=\"", " cy=\"", " x1=\"", " x2=\"", " y1=\"", " y2=\"", " x=\"", " y=\""}) {
    for (auto at = html.find(name); at != std::string::npos; at = html.find(name, at + 1)) {
      const auto from = at + std::strlen(name);
      const std::string value = html.substr(from, html.find('"', from) - from);
      INFO(name << value);
      CHECK(value.find_first_not_of("0123456789.,- ") == std::string::npos);
      ++count;
    }
  }
  CHECK(count > 0);
}

}  // namespace

TEST_CASE("writer to reader: every value bit for bit, nulls, non-finite values, escapes and events") {
  const auto seed = accelkit::test::test_seed();
  INFO("ACCELKIT_TEST_SEED=" << seed);
  std::mt19937_64 rng(seed);
  TempDir dir("run-metrics");
  std::vector<StepMetrics> written;
  std::vector<std::string> writer_warnings;
  {
    RunSegment run = segment(0);
    run.time.clear();
    MetricsWriter w(dir.str(), run);
    writer_warnings = w.warnings();
    CHECK(w.path() == dir.str() + "/metrics.jsonl");
    for (std::int64_t s = 1; s <= 300; ++s) {
      StepMetrics m;
      m.step = s;
      if (s % 3 != 0) m.loss = random_double(rng);
      m.step_ms = random_double(rng);
      m.samples_per_s = random_double(rng);
      if (s % 5 != 0) m.memory_bytes = rng();
      if (s % 7 != 0) m.temperature_c = random_double(rng);
      if (s % 2 == 0) m.power_w = random_double(rng);
      written.push_back(m);
    }
    // Values at the edges, and the text that JSON must escape.
    written[0].loss = std::numeric_limits<double>::quiet_NaN();
    written[1].loss = std::numeric_limits<double>::infinity();
    written[2].loss = -std::numeric_limits<double>::infinity();
    written[3].loss = -0.0;
    written[4].loss = std::numeric_limits<double>::denorm_min();
    written[5].loss = std::numeric_limits<double>::max();
    written[6].loss = 0.1 + 0.2;
    written[7].memory_bytes = std::numeric_limits<std::uint64_t>::max();
    written[8].memory_bytes = 0;
    written[9].step_ms = 1.0;
    written[10].events = {"warn: 91 C >= 90 C", "pause 12.3 s: \"hot\" \\ cooling\n\ttab", "stop: \x01 control",
                          "caf\xC3\xA9 \xE2\x9C\x93", ""};
    for (const auto& m : written) w.write(m);
  }
  CHECK(writer_warnings.empty());

  const std::string text = read_text(dir.path() / "metrics.jsonl");
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  // One record per line: a newline inside a string is escaped.
  CHECK(std::count(text.begin(), text.end(), '\n') == static_cast<long>(written.size() + 1));
  CHECK(text.rfind("{\"event\":\"run\",", 0) == 0);
  CHECK(contains(text, "\"loss\":\"nan\""));
  CHECK(contains(text, "\"loss\":\"-inf\""));
  CHECK(contains(text, "\"loss\":null"));

  const MetricsLog log = read_metrics((dir.path() / "metrics.jsonl").string());
  CHECK(log.warnings.empty());
  REQUIRE(log.runs.size() == 1);
  const RunSegment& r = log.runs[0];
  CHECK(r.device == segment(0).device);
  CHECK(r.model == "mlp 4x1024");
  CHECK(r.precision == "bf16 autocast");
  CHECK(r.batch == 64);
  CHECK(r.start_step == 0);
  // The writer filled the time: UTC, ISO 8601.
  REQUIRE(r.time.size() == 20);
  CHECK(r.time[4] == '-');
  CHECK(r.time[10] == 'T');
  CHECK(r.time[19] == 'Z');
  REQUIRE(log.steps.size() == written.size());
  for (std::size_t i = 0; i < written.size(); ++i) check_same(log.steps[i], written[i]);
  CHECK(std::signbit(*log.steps[3].loss));
  // Values from anywhere in the doubles' range still make a page with finite coordinates.
  check_coordinates(render_report_html(log));

  // Each record's line is what metrics_line() makes of it, and reading a line back gives the record.
  for (const auto& m : written) {
    const MetricsLog one = parse_metrics(metrics_line(m) + "\n", "one");
    REQUIRE(one.steps.size() == 1);
    check_same(one.steps[0], m);
  }
}

TEST_CASE("invalid UTF-8 in a string is written as U+FFFD, never as a line the reader refuses") {
  StepMetrics m = plain_step(1, 0.5);
  m.events = {"bad \xFF\xFE byte"};
  const MetricsLog log = parse_metrics(metrics_line(m), "x");
  REQUIRE(log.steps.size() == 1);
  CHECK(log.steps[0].events == std::vector<std::string>{"bad \xEF\xBF\xBD\xEF\xBF\xBD byte"});
}

TEST_CASE("a resumed run appends a segment; of a step recorded twice the later record wins; steps sorted") {
  TempDir dir("run-metrics");
  {
    MetricsWriter w(dir.str(), segment(0));
    for (std::int64_t s = 1; s <= 10; ++s) w.write(plain_step(s, 1.0 / static_cast<double>(s)));
  }
  {
    // Resumed from the checkpoint of step 6: steps 7..10 again, with other values, then more.
    MetricsWriter w(dir.str(), segment(6));
    CHECK(w.warnings().empty());
    for (std::int64_t s = 12; s >= 7; --s) {  // out of order on purpose
      StepMetrics m = plain_step(s, 100.0 + static_cast<double>(s));
      m.events = {"resumed value"};
      w.write(m);
    }
  }
  const MetricsLog log = read_metrics((dir.path() / "metrics.jsonl").string());
  REQUIRE(log.runs.size() == 2);
  CHECK(log.runs[0].start_step == 0);
  CHECK(log.runs[1].start_step == 6);
  REQUIRE(log.steps.size() == 12);
  for (std::size_t i = 0; i < 12; ++i) {
    const auto s = static_cast<std::int64_t>(i + 1);
    CHECK(log.steps[i].step == s);
    if (s <= 6) {
      check_same(log.steps[i], plain_step(s, 1.0 / static_cast<double>(s)));
    } else {
      CHECK(*log.steps[i].loss == 100.0 + static_cast<double>(s));
      CHECK(log.steps[i].events == std::vector<std::string>{"resumed value"});
    }
  }
}

TEST_CASE("a torn last line is skipped with a warning; a malformed line in the middle is refused with path:line") {
  const std::string run = metrics_line(segment(0));
  const std::string one = metrics_line(plain_step(1, 0.5));
  const std::string two = metrics_line(plain_step(2, 0.25));

  SUBCASE("torn last line, no newline") {
    const MetricsLog log = parse_metrics(run + "\n" + one + "\n" + two.substr(0, two.size() / 2), "m.jsonl");
    REQUIRE(log.steps.size() == 1);
    CHECK(log.steps[0].step == 1);
    REQUIRE(log.warnings.size() == 1);
    CHECK(contains(log.warnings[0], "m.jsonl:3:"));
    CHECK(contains(log.warnings[0], "torn"));
  }
  SUBCASE("torn last line followed by blank lines, and a complete last line without its newline") {
    const MetricsLog torn = parse_metrics(run + "\n" + one + "\n{\"step\":2,\"lo\n\n  \n", "m.jsonl");
    CHECK(torn.steps.size() == 1);
    REQUIRE(torn.warnings.size() == 1);
    CHECK(contains(torn.warnings[0], "m.jsonl:3:"));
    const MetricsLog whole = parse_metrics(run + "\n" + one + "\n" + two, "m.jsonl");
    CHECK(whole.steps.size() == 2);
    CHECK(whole.warnings.empty());
  }
  SUBCASE("malformed line in the middle") {
    const std::string text = run + "\n" + one + "\n" + two.substr(0, 10) + "\n" + two + "\n";
    CHECK_THROWS_WITH_AS(parse_metrics(text, "m.jsonl"), doctest::Contains("m.jsonl:3: "), MetricsError);
  }
  SUBCASE("a record of the wrong shape in the middle names the key") {
    const std::string cases[][2] = {
        {R"({"step":2,"step_ms":"fast","samples_per_s":1})", "\"step_ms\" is not a number"},
        {R"({"step":2.5,"step_ms":1,"samples_per_s":1})", "\"step\" is not a 64-bit integer"},
        {R"({"step":2,"samples_per_s":1})", "no \"step_ms\""},
        {R"({"step":2,"step_ms":1,"samples_per_s":1,"memory_bytes":-1})", "\"memory_bytes\" is not an unsigned"},
        {R"({"step":2,"step_ms":1,"samples_per_s":1,"events":"hot"})", "\"events\" is not a list"},
        {R"({"step":2,"step_ms":1,"samples_per_s":1,"events":[3]})", "an event is not a string"},
        {R"({"event":"run","batch":"big"})", "\"batch\" is not a 64-bit integer"},
        {R"({"loss":1})", "neither a run record"},
        {R"([1,2])", "not a JSON object"},
    };
    for (const auto& c : cases) {
      INFO(c[0]);
      const std::string text = run + "\n" + c[0] + "\n" + two + "\n";
      const std::string want = "m.jsonl:2: " + c[1];
      CHECK_THROWS_WITH_AS(parse_metrics(text, "m.jsonl"), doctest::Contains(want.c_str()), MetricsError);
      // The same record as the last line is only a warning.
      const MetricsLog log = parse_metrics(run + "\n" + two + "\n" + c[0] + "\n", "m.jsonl");
      CHECK(log.steps.size() == 1);
      CHECK(log.warnings.size() == 1);
    }
  }
  SUBCASE("records a newer writer adds are passed over; so are unknown keys") {
    const std::string text = run + "\n{\"event\":\"end\",\"steps\":2}\n" +
                             R"({"step":1,"step_ms":2,"samples_per_s":3,"gpu_util":0.5})" + "\n";
    const MetricsLog log = parse_metrics(text, "m.jsonl");
    CHECK(log.runs.size() == 1);
    REQUIRE(log.steps.size() == 1);
    CHECK(log.steps[0].step_ms == 2);
    CHECK(!log.steps[0].loss);
    CHECK(log.warnings.empty());
  }
  SUBCASE("a missing file") {
    CHECK_THROWS_WITH_AS(read_metrics("/nonexistent/metrics.jsonl"), doctest::Contains("/nonexistent/metrics.jsonl"),
                         MetricsError);
  }
}

TEST_CASE("the writer cuts a crash's torn last line before appending, and keeps a complete one") {
  TempDir dir("run-metrics");
  const fs::path file = dir.path() / "metrics.jsonl";
  const std::string two = metrics_line(plain_step(2, 0.25));
  {
    MetricsWriter w(dir.str(), segment(0));
    w.write(plain_step(1, 0.5));
  }
  append_text(file, two.substr(0, 17));  // the crash
  {
    MetricsWriter w(dir.str(), segment(1));
    REQUIRE(w.warnings().size() == 1);
    CHECK(contains(w.warnings()[0], "torn last line of 17 bytes"));
    w.write(plain_step(2, 0.125));
  }
  MetricsLog log = read_metrics(file.string());
  CHECK(log.warnings.empty());
  CHECK(log.runs.size() == 2);
  REQUIRE(log.steps.size() == 2);
  CHECK(*log.steps[1].loss == 0.125);

  append_text(file, two);  // complete, but without its newline
  {
    MetricsWriter w(dir.str(), segment(2));
    CHECK(w.warnings().empty());
  }
  log = read_metrics(file.string());
  CHECK(log.warnings.empty());
  CHECK(log.runs.size() == 3);
  CHECK(*log.steps[1].loss == 0.25);

  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == (0644 & ~current_umask()));
  CHECK_THROWS_AS(MetricsWriter((dir.path() / "missing").string(), segment(0)), MetricsError);
}

TEST_CASE("report: each plotted value equals its record exactly; missing quantities say n/a") {
  const auto seed = accelkit::test::test_seed();
  INFO("ACCELKIT_TEST_SEED=" << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::string text = metrics_line(segment(0)) + "\n";
  std::vector<StepMetrics> records;
  for (std::int64_t s = 1; s <= 80; ++s) {
    StepMetrics m;
    m.step = s;
    if (s % 4 == 0) m.loss = 5.0 * std::pow(10.0, -3.0 * unit(rng) - 3.0 * static_cast<double>(s) / 80);  // > 2 decades
    m.step_ms = 5 + unit(rng);
    m.samples_per_s = 1000 * unit(rng);
    m.memory_bytes = (std::uint64_t(3) << 30) + rng() % (std::uint64_t(1) << 40);
    if (s == 40) m.events = {"warn: 91 C >= 90 C", "pause 12.3 s: <cooling> & \"waiting\""};
    if (s == 60) m.events = {"stop: 95 C"};
    records.push_back(m);
  }
  records[7].loss = std::numeric_limits<double>::quiet_NaN();  // step 8: not plotted
  for (const auto& m : records) text += metrics_line(m) + "\n";
  const MetricsLog log = parse_metrics(text, "m.jsonl");
  const std::string html = render_report_html(log);

  // Self-contained: nothing fetched, no script; the text is escaped.
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(!contains(html, "<script"));
  CHECK(!contains(html, " src="));
  CHECK(!contains(html, " href="));
  CHECK(!contains(html, "<cooling>"));
  CHECK(contains(html, "pause 12.3 s: &lt;cooling&gt; &amp; &quot;waiting&quot;"));

  // Loss: only the steps with a finite loss, on a log scale.
  const Plotted loss = plotted(html, "loss");
  std::size_t k = 0;
  for (const auto& m : records) {
    if (!m.loss || !std::isfinite(*m.loss)) continue;
    REQUIRE(k < loss.steps.size());
    CHECK(loss.steps[k] == m.step);
    CHECK(same(std::strtod(loss.values[k].c_str(), nullptr), *m.loss));
    ++k;
  }
  CHECK(k == loss.steps.size());
  CHECK(contains(figure_of(html, "loss"), "(log scale)"));
  CHECK(contains(figure_of(html, "loss"), "1 non-finite value not plotted, the first at step 8"));

  const Plotted tput = plotted(html, "throughput");
  const Plotted mem = plotted(html, "memory");
  REQUIRE(tput.steps.size() == records.size());
  REQUIRE(mem.steps.size() == records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    CHECK(tput.steps[i] == records[i].step);
    CHECK(same(std::strtod(tput.values[i].c_str(), nullptr), records[i].samples_per_s));
    CHECK(mem.steps[i] == records[i].step);
    CHECK(std::stoull(mem.values[i]) == *records[i].memory_bytes);  // bytes, exactly
  }
  CHECK(contains(figure_of(html, "memory"), "(GiB)"));
  CHECK(contains(figure_of(html, "throughput"), "<polyline"));

  // Never measured: "n/a", no empty frame; power has no plot at all.
  CHECK(contains(figure_of(html, "temperature"), "n/a: not measured"));
  CHECK(!contains(figure_of(html, "temperature"), "<svg"));
  CHECK(figure_of(html, "power").empty());

  // Guard events: a marker in each plot, its text in the title.
  CHECK(contains(figure_of(html, "loss"), "<g class=\"marker warn\" data-step=\"40\"><title>warn: 91 C &gt;= 90 C"));
  CHECK(contains(figure_of(html, "throughput"), "<g class=\"marker pause\" data-step=\"40\">"));
  CHECK(contains(figure_of(html, "memory"), "<g class=\"marker stop\" data-step=\"60\"><title>stop: 95 C"));

  // The summary.
  CHECK(contains(html, "mlp 4x1024"));
  CHECK(contains(html, "1 to 80 (80 recorded)"));
  CHECK(contains(html, "final loss"));
}

TEST_CASE("report: linear loss axis within two decades; power and temperature when measured; resumes marked") {
  std::string text = metrics_line(segment(0)) + "\n";
  for (std::int64_t s = 1; s <= 10; ++s) {
    StepMetrics m = plain_step(s, 2.0 - 0.1 * static_cast<double>(s));
    m.power_w = 250.0 + static_cast<double>(s);
    text += metrics_line(m) + "\n";
  }
  text += metrics_line(segment(5)) + "\n";
  const std::string html = render_report_html(parse_metrics(text, "m.jsonl"));
  CHECK(!contains(figure_of(html, "loss"), "log scale"));
  CHECK(contains(figure_of(html, "temperature"), "<polyline"));
  const Plotted power = plotted(html, "power");
  REQUIRE(power.values.size() == 10);
  CHECK(power.values[9] == "260");
  CHECK(contains(figure_of(html, "power"), "<g class=\"marker resume\" data-step=\"5\">"));
  CHECK(contains(html, "<tr><th>segments</th><td>2 (1 resume)</td></tr>"));

  // The loss's scale turns logarithmic past two decades, not before.
  for (const double ratio : {50.0, 99.0, 101.0, 150.0}) {
    MetricsLog two;
    two.steps = {plain_step(1, 3.0), plain_step(2, 3.0 / ratio)};
    INFO("max/min " << ratio);
    CHECK(contains(figure_of(render_report_html(two), "loss"), "(log scale)") == (ratio > 100));
  }
}

TEST_CASE("report: values at the ends of the doubles' range, and steps far apart, still plot") {
  constexpr double big = std::numeric_limits<double>::max();
  constexpr double tiny = std::numeric_limits<double>::denorm_min();
  MetricsLog log;
  const std::int64_t steps[] = {-5, 1, std::int64_t(1) << 62};
  for (std::size_t i = 0; i < 3; ++i) {
    StepMetrics m = plain_step(steps[i], i == 0 ? tiny : 2 * tiny);
    m.samples_per_s = i == 1 ? -big : big;
    m.temperature_c = big;
    m.power_w = i == 2 ? 2 * tiny : tiny;
    m.memory_bytes = std::numeric_limits<std::uint64_t>::max() - i;
    log.steps.push_back(m);
  }
  const std::string html = render_report_html(log);
  check_coordinates(html);
  CHECK(plotted(html, "throughput").values == std::vector<std::string>{exact(big), exact(-big), exact(big)});
  CHECK(plotted(html, "memory").values.back() == "18446744073709551613");
}

TEST_CASE("report: a long series is thinned to each run's first, lowest, highest and last point, exactly") {
  std::mt19937_64 rng(accelkit::test::test_seed());
  std::normal_distribution<double> noise(0.0, 1.0);
  MetricsLog log;
  const std::int64_t n = 20000;
  for (std::int64_t s = 1; s <= n; ++s) {
    StepMetrics m = plain_step(s, 1.0);
    m.samples_per_s = 1000 + noise(rng);
    log.steps.push_back(m);
  }
  log.steps[12345].samples_per_s = 5000;  // a spike
  log.steps[777].samples_per_s = 1;       // a dip
  const Plotted p = plotted(render_report_html(log), "throughput");
  CHECK(p.steps.size() <= kReportMaxPoints);
  CHECK(p.steps.size() >= 2 * kReportBuckets);
  CHECK(p.steps.front() == 1);
  CHECK(p.steps.back() == n);
  bool spike = false, dip = false;
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    if (i) CHECK(p.steps[i] > p.steps[i - 1]);
    const auto& m = log.steps[static_cast<std::size_t>(p.steps[i] - 1)];
    CHECK(same(std::strtod(p.values[i].c_str(), nullptr), m.samples_per_s));
    spike = spike || p.steps[i] == 12346;
    dip = dip || p.steps[i] == 778;
  }
  CHECK(spike);
  CHECK(dip);
}

TEST_CASE("report: an empty log, and write_report_html writes the file or throws") {
  const std::string empty = render_report_html(MetricsLog{});
  CHECK(contains(empty, "none recorded"));
  CHECK(contains(figure_of(empty, "loss"), "n/a: not measured"));
  CHECK(contains(figure_of(empty, "throughput"), "n/a: not measured"));

  TempDir dir("run-metrics");
  {
    MetricsWriter w(dir.str(), segment(0));
    w.write(plain_step(1, 0.5));
  }
  append_text(dir.path() / "metrics.jsonl", "{\"step\":2,");
  const std::string html_path = (dir.path() / "report.html").string();
  write_report_html((dir.path() / "metrics.jsonl").string(), html_path);
  const std::string html = read_text(html_path);
  CHECK(html == render_report_html(read_metrics((dir.path() / "metrics.jsonl").string())));
  CHECK(contains(html, "<p class=\"warning\">"));  // the torn line, said in the page
  CHECK_THROWS_AS(write_report_html((dir.path() / "none.jsonl").string(), html_path), MetricsError);
  CHECK(read_text(html_path) == html);  // left as it was
}

}  // namespace run_metrics_suite
