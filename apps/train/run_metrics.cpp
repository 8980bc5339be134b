// metrics.jsonl (writer, reader) and report.html (run_metrics.hpp).
#include "accelkit/run_metrics.hpp"

#include "accelkit/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace accelkit::metrics_io {

namespace {

using Json = nlohmann::ordered_json;

std::string system_error_text(int err) { return std::strerror(err); }

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A double as JSON: a number that reads back bit for bit, or "nan"/"inf"/"-inf".
Json number_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}
template <typename T>
Json optional_json(const std::optional<T>& v) {
  if (!v) return nullptr;
  if constexpr (std::is_floating_point_v<T>) {
    return number_json(*v);
  } else {
    return *v;
  }
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// A line that does not hold a valid record: the reader adds where.
struct BadRecord {
  std::string why;
};

const Json* member(const Json& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> read_double(const Json& o, const char* key) {
  const Json* v = member(o, key);
  if (!v) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  if (v->is_string()) {
    const auto& s = v->get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  throw BadRecord{std::string("\"") + key + "\" is not a number: " + dump(*v)};
}
double required_double(const Json& o, const char* key) {
  if (auto v = read_double(o, key)) return *v;
  throw BadRecord{std::string("no \"") + key + "\""};
}
std::optional<std::int64_t> read_int(const Json& o, const char* key) {
  const Json* v = member(o, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned() && v->get<std::uint64_t>() <= std::uint64_t(std::numeric_limits<std::int64_t>::max()))
    return static_cast<std::int64_t>(v->get<std::uint64_t>());
  if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<std::int64_t>();
  throw BadRecord{std::string("\"") + key + "\" is not a 64-bit integer: " + dump(*v)};
}
std::string read_string(const Json& o, const char* key) {
  const Json* v = member(o, key);
  if (!v) return {};
  if (!v->is_string()) throw BadRecord{std::string("\"") + key + "\" is not a string: " + dump(*v)};
  return v->get<std::string>();
}

RunSegment run_from(const Json& o) {
  RunSegment r;
  r.device = read_string(o, "device");
  r.model = read_string(o, "model");
  r.precision = read_string(o, "precision");
  r.batch = read_int(o, "batch").value_or(0);
  r.start_step = read_int(o, "start_step").value_or(0);
  r.time = read_string(o, "time");
  return r;
}

StepMetrics step_from(const Json& o) {
  StepMetrics m;
  m.step = *read_int(o, "step");
  m.loss = read_double(o, "loss");
  m.step_ms = required_double(o, "step_ms");
  m.samples_per_s = required_double(o, "samples_per_s");
  if (const Json* v = member(o, "memory_bytes")) {
    if (!v->is_number_unsigned()) throw BadRecord{"\"memory_bytes\" is not an unsigned integer: " + dump(*v)};
    m.memory_bytes = v->get<std::uint64_t>();
  }
  m.temperature_c = read_double(o, "temperature_c");
  m.power_w = read_double(o, "power_w");
  if (const Json* v = member(o, "events")) {
    if (!v->is_array()) throw BadRecord{"\"events\" is not a list: " + dump(*v)};
    for (const auto& e : *v) {
      if (!e.is_string()) throw BadRecord{"an event is not a string: " + dump(e)};
      m.events.push_back(e.get<std::string>());
    }
  }
  return m;
}

// Reads one record into the log; throws BadRecord.
void read_record(const std::string& line, MetricsLog& log, std::map<std::int64_t, StepMetrics>& steps) {
  Json o;
  try {
    o = Json::parse(line);
  } catch (const Json::parse_error& e) {
    std::string why = e.what();
    if (auto p = why.find("] "); p != std::string::npos) why.erase(0, p + 2);
    throw BadRecord{why};
  }
  if (!o.is_object()) throw BadRecord{"not a JSON object"};
  if (const Json* event = member(o, "event")) {
    if (!event->is_string()) throw BadRecord{"\"event\" is not a string: " + dump(*event)};
    if (event->get_ref<const std::string&>() == "run") log.runs.push_back(run_from(o));
    return;  // a newer writer's other records
  }
  if (!member(o, "step")) throw BadRecord{"neither a run record (\"event\") nor a step record (\"step\")"};
  StepMetrics m = step_from(o);
  steps[m.step] = std::move(m);
}

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace
}  // namespace accelkit::metrics_io

namespace accelkit {

std::string metrics_line(const RunSegment& run) {
  using metrics_io::Json;
  Json j;
  j["event"] = "run";
  j["device"] = run.device;
  j["model"] = run.model;
  j["precision"] = run.precision;
  j["batch"] = run.batch;
  j["start_step"] = run.start_step;
  j["time"] = run.time;
  return metrics_io::dump(j);
}

std::string metrics_line(const StepMetrics& m) {
  using metrics_io::Json;
  Json j;
  j["step"] = m.step;
  j["loss"] = metrics_io::optional_json(m.loss);
  j["step_ms"] = metrics_io::number_json(m.step_ms);
  j["samples_per_s"] = metrics_io::number_json(m.samples_per_s);
  j["memory_bytes"] = metrics_io::optional_json(m.memory_bytes);
  j["temperature_c"] = metrics_io::optional_json(m.temperature_c);
  j["power_w"] = metrics_io::optional_json(m.power_w);
  if (!m.events.empty()) j["events"] = m.events;
  return metrics_io::dump(j);
}

MetricsLog parse_metrics(const std::string& text, const std::string& name) {
  MetricsLog log;
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  std::size_t last = lines.size();
  while (last > 0 && metrics_io::blank(lines[last - 1])) --last;
  std::map<std::int64_t, StepMetrics> steps;
  for (std::size_t i = 0; i < last; ++i) {
    if (metrics_io::blank(lines[i])) continue;
    try {
      metrics_io::read_record(lines[i], log, steps);
    } catch (const metrics_io::BadRecord& e) {
      std::string where = name + ":" + std::to_string(i + 1) + ": ";
      if (i + 1 < last) throw MetricsError(where + e.why);
      log.warnings.push_back(where + "skipped the last line, torn (a crash while it was written?): " + e.why);
    }
  }
  log.steps.reserve(steps.size());
  for (auto& [step, m] : steps) log.steps.push_back(std::move(m));
  return log;
}

MetricsLog read_metrics(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MetricsError("cannot open " + path + ": " + metrics_io::system_error_text(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw MetricsError("cannot read " + path);
  return parse_metrics(text.str(), path);
}

MetricsWriter::MetricsWriter(const std::string& dir, RunSegment run) : path_(dir + "/metrics.jsonl") {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw MetricsError("cannot open " + path_ + " for appending: " + metrics_io::system_error_text(errno));
  auto fail = [this](const char* what) {
    throw MetricsError(std::string(what) + " " + path_ + ": " + metrics_io::system_error_text(errno));
  };
  try {
    // A crash may have left a last line without its newline: a complete record keeps its line,
    // anything else is cut off so that this segment starts on a line of its own.
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail("cannot stat");
    const off_t size = st.st_size;
    off_t start = size;  // of the last line
    for (bool found = false; start > 0 && !found;) {
      char chunk[4096];
      const off_t at = std::max<off_t>(0, start - static_cast<off_t>(sizeof chunk));
      const auto n = static_cast<std::size_t>(start - at);
      if (::pread(fd_, chunk, n, at) != static_cast<ssize_t>(n)) fail("cannot read");
      for (std::size_t i = n; i > 0 && !found; --i) {
        if (chunk[i - 1] == '\n') found = true;
        else --start;
      }
    }
    if (start < size) {
      std::string tail(static_cast<std::size_t>(size - start), '\0');
      if (::pread(fd_, tail.data(), tail.size(), start) != static_cast<ssize_t>(tail.size())) fail("cannot read");
      MetricsLog scratch;
      std::map<std::int64_t, StepMetrics> steps;
      bool complete = true;
      try {
        metrics_io::read_record(tail, scratch, steps);
      } catch (const metrics_io::BadRecord&) {
        complete = false;
      }
      if (complete) {
        append_line("");
      } else {
        if (::ftruncate(fd_, start) != 0) fail("cannot cut the torn last line of");
        warnings_.push_back(path_ + ": cut off a torn last line of " + std::to_string(size - start) +
                            " bytes (a crash while it was written?)");
      }
    }
    if (run.time.empty()) run.time = metrics_io::utc_now();
    append_line(metrics_line(run));
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

MetricsWriter::~MetricsWriter() { ::close(fd_); }

void MetricsWriter::write(const StepMetrics& m) { append_line(metrics_line(m)); }

void MetricsWriter::append_line(const std::string& line) {
  std::string bytes = line + "\n";
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw MetricsError("cannot write " + path_ + ": " + metrics_io::system_error_text(n < 0 ? errno : EIO));
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace accelkit
