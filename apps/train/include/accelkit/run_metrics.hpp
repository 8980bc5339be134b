// A training run's metrics on disk (metrics.jsonl in the run directory) and the report made from
// them (report.html).
//
// metrics.jsonl: one JSON object per line, appended. Each run segment (a fresh run, or a resumed
// one) begins with a run record, then one record per step:
//   {"event":"run","device":"cuda:0","model":"mlp","precision":"bf16 autocast","batch":64,
//    "start_step":0,"time":"2025-01-31T12:00:00Z"}
//   {"step":1,"loss":0.693,"step_ms":12.5,"samples_per_s":5120,"memory_bytes":1048576,
//    "temperature_c":61,"power_w":null,"events":["warn: 91 C >= 90 C"]}
// null (or an absent key) is "not measured"; "events" may be absent when empty. Numbers are
// written so that they read back bit for bit; a non-finite one (a diverged loss) is the string
// "nan", "inf" or "-inf". Other keys are ignored, and so are records with another "event", so
// that a newer writer's file still reads.
//
// report.html: one self-contained file (inline CSS and SVG, no script, nothing fetched) with a
// summary and line plots over steps of the loss (only steps that have one; a log scale when
// its positive values span more than two decades), throughput, device memory, temperature and,
// when measured, power. Guard events and resumes are vertical markers with a <title>; a
// quantity never measured shows "n/a: not measured". For tools and tests, each plotted series
// is one element
//   <polyline class="series" data-series="loss" data-steps="1 2 3" data-values="0.5 0.25 0.125" .../>
// whose data-values are the records' values exactly as in metrics.jsonl (%.17g; memory in
// bytes, as an integer), in the order of data-steps. Non-finite values are not plotted (the
// plot's caption counts them). A series of more than kReportMaxPoints points is thinned to the
// first, lowest, highest and last point of each of kReportBuckets equal runs of points, so the
// plot keeps every spike; its data-steps/data-values then hold the plotted points only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace accelkit {

// A metrics file that cannot be read or written: what() names the path (and line) and why.
class MetricsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a run segment ran on, written once when it starts.
struct RunSegment {
  std::string device;     // "cuda:0 (NVIDIA H100 80GB HBM3)"
  std::string model;      // "mlp 4x1024"
  std::string precision;  // "bf16 autocast"
  std::int64_t batch = 0;
  std::int64_t start_step = 0;  // steps completed before this segment's first (a resume's checkpoint)
  std::string time;             // UTC, ISO 8601 ("2025-01-31T12:00:00Z"); MetricsWriter fills it when empty
};

struct StepMetrics {
  std::int64_t step = 0;  // 1-based: the step that this record completes
  std::optional<double> loss;
  double step_ms = 0;        // the step's wall time
  double samples_per_s = 0;  // throughput
  std::optional<std::uint64_t> memory_bytes;  // device memory in use (the allocator's view)
  std::optional<double> temperature_c;
  std::optional<double> power_w;
  // The guard's events at this step, as text: "warn: 91 C >= 90 C", "pause 12.3 s: ...",
  // "stop: ...". Markers in the report; the word before the first ':' or ' ' styles them.
  std::vector<std::string> events;
};

struct MetricsLog {
  std::vector<RunSegment> runs;    // in file order
  std::vector<StepMetrics> steps;  // sorted by step; of a step recorded twice, the later record
  std::vector<std::string> warnings;  // e.g. a torn last line that was skipped
};

// Appends to <dir>/metrics.jsonl (created with mode 0644 less the umask; the directory must exist).
// Each record is one write(2) of a whole line, so the process crashing loses at most the line
// being written; nothing is fsynced. The constructor first cuts off a torn last line that an
// earlier crash left (one without its newline; reported by warnings()), then writes the run
// record. One writer per file (the run directory's checkpoint lock). Throws MetricsError.
class MetricsWriter {
 public:
  MetricsWriter(const std::string& dir, RunSegment run);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  void write(const StepMetrics& m);
  const std::string& path() const noexcept { return path_; }
  const std::vector<std::string>& warnings() const noexcept { return warnings_; }

 private:
  void append_line(const std::string& line);

  std::string path_;
  int fd_ = -1;
  std::vector<std::string> warnings_;
};

// One record as its line (without the newline), as MetricsWriter writes it.
std::string metrics_line(const RunSegment& run);
std::string metrics_line(const StepMetrics& m);

// Reads a metrics.jsonl. A malformed last line (a crash while it was written) is skipped with a
// warning; a malformed line anywhere else is a MetricsError "<path>:<line>: <why>". Blank lines
// are skipped. A missing or unreadable file is a MetricsError.
MetricsLog read_metrics(const std::string& path);
// The same from the text of such a file; `name` stands for the path in messages.
MetricsLog parse_metrics(const std::string& text, const std::string& name);

// Plots of more points than this are thinned (see the file's comment).
inline constexpr std::size_t kReportMaxPoints = 4000;
inline constexpr std::size_t kReportBuckets = 1000;

// The report page (see the file's comment). Never throws for any log, empty included.
std::string render_report_html(const MetricsLog& log);
// Reads metrics_path and writes its report to html_path atomically (atomic_file.hpp); the
// reader's warnings are shown in the page. Throws MetricsError, or std::runtime_error from the
// write.
void write_report_html(const std::string& metrics_path, const std::string& html_path);

}  // namespace accelkit
