#include "trace_out.hpp"

#include <iostream>
#include <stdexcept>
#include <utility>

#include "accelkit/memory_scope.hpp"
#include "cli.hpp"
#include "format.hpp"
#include "table.hpp"

namespace accelkit::cli {

namespace {

std::string trace_ms(double us) { return fixed(us / 1e3, 3); }

std::string signed_bytes(std::int64_t v) {
  if (v == 0) return "0 B";
  return (v < 0 ? "-" : "+") + format_bytes(static_cast<std::uint64_t>(v < 0 ? -v : v));
}

}  // namespace

void render_trace(std::ostream& out, const TraceSummary& s, const std::string& steps) {
  out << "trace: " << s.path << " (" << s.events << " events, " << steps
      << "); open in https://ui.perfetto.dev or chrome://tracing\n"
      << "  recorded by " << s.profiler << " over " << trace_ms(s.span_us) << " ms\n";
  out << "top operations by self time (less the operations nested in them):\n";
  Table t({"operation", "where", "calls", "self ms", "total ms"});
  t.right_align(2).right_align(3).right_align(4);
  for (const OpTime& r : s.top_by_self_time)
    t.add_row({r.name, r.where, std::to_string(r.calls), trace_ms(r.self_us), trace_ms(r.total_us)});
  t.print(out);
  if (!s.memory) return;
  out << "top operations by memory (allocated in the operation itself; net: less what it freed):\n";
  if (s.top_by_memory.empty()) {
    out << "  (no allocations recorded)\n";
    return;
  }
  Table m({"operation", "where", "allocations", "allocated", "net"});
  m.right_align(2).right_align(3).right_align(4);
  for (const OpMemory& r : s.top_by_memory)
    m.add_row({r.name, r.where, std::to_string(r.allocations), format_bytes(static_cast<std::uint64_t>(r.bytes)),
               signed_bytes(r.net_bytes)});
  m.print(out);
}

Json trace_json(const TraceSummary& s, const std::string& steps) {
  Json times = Json::array();
  for (const OpTime& r : s.top_by_self_time)
    times.push_back({{"name", r.name}, {"where", r.where}, {"calls", r.calls}, {"self_us", r.self_us},
                     {"total_us", r.total_us}});
  Json memory = Json::array();
  for (const OpMemory& r : s.top_by_memory)
    memory.push_back({{"name", r.name}, {"where", r.where}, {"allocations", r.allocations}, {"bytes", r.bytes},
                      {"net_bytes", r.net_bytes}});
  return Json{{"path", s.path},     {"profiler", s.profiler}, {"steps", steps},
              {"events", s.events}, {"span_us", s.span_us},   {"memory", s.memory},
              {"top_by_self_time", times},
              {"top_by_memory", memory}};
}

StepTrace::StepTrace(std::string path) {
  try {
    check_trace_path(path);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  options_.path = std::move(path);
}

void StepTrace::on_start(std::int64_t first, std::int64_t steps) {
  if (steps - first == 1) begin(first);  // nothing to warm up with
}

void StepTrace::after_step(std::int64_t step, std::int64_t steps) {
  if (trace_.running()) {
    last_traced_ = step;
    step_.reset();
    if (step - first_traced_ + 1 >= kSteps || step == steps) end();
    else step_.emplace("train step");
  } else if (!summary_ && error_.empty() && first_traced_ == 0 && step < steps) {
    begin(step);
  }
}

void StepTrace::begin(std::int64_t after) {
  first_traced_ = after + 1;
  try {
    trace_.start(options_);
    step_.emplace("train step");
  } catch (const std::exception& e) {
    error_ = e.what();
  }
}

void StepTrace::end() {
  step_.reset();
  try {
    summary_ = trace_.stop();
  } catch (const std::exception& e) {
    error_ = e.what();
  }
}

void StepTrace::report(std::ostream& err, bool json) {
  if (trace_.running()) end();
  if (!error_.empty()) {
    err << "accelkit train: " << error_ << '\n';
    return;
  }
  if (!summary_) {
    err << "accelkit train: trace: nothing traced (no step ran)\n";
    return;
  }
  const std::string steps = last_traced_ < first_traced_   ? std::string("no step: the run stopped first")
                            : first_traced_ == last_traced_ ? "step " + std::to_string(first_traced_)
                                                            : "steps " + std::to_string(first_traced_) + "-" +
                                                                  std::to_string(last_traced_);
  render_trace(err, *summary_, steps);
  if (json) std::cout << Json{{"event", "trace"}, {"trace", trace_json(*summary_, steps)}}.dump() << std::endl;
}

}  // namespace accelkit::cli
