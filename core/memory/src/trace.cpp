#include "accelkit/trace.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <thread>
#include <utility>

#include "accelkit/sdk/torch_compat_profiler.hpp"

namespace accelkit {

namespace fs = std::filesystem;

struct Trace::State {
  TraceOptions options;
  std::unique_ptr<compat::ProfilerSession> session;
  std::thread::id thread;
};

namespace {

[[noreturn]] void refuse_path(const std::string& path, const std::string& why) {
  throw std::invalid_argument("trace: cannot write '" + path + "': " + why);
}

// Ranges of one thread (or stream) in nesting order: by start, the longer first when two start
// together, with the position of the range each one is nested in (-1: none).
struct Lane {
  std::vector<std::size_t> order;  // indices into the run's ranges
  std::vector<long> parent;        // per position in `order`: the position of its parent
};

Lane nest(const std::vector<compat::ProfiledRange>& ranges, std::vector<std::size_t> members,
          std::vector<std::int64_t>& self_ns) {
  std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = ranges[a];
    const auto& y = ranges[b];
    return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.end_ns > y.end_ns;
  });
  Lane lane{members, std::vector<long>(members.size(), -1)};
  std::vector<long> stack;  // positions of the ranges open at the current start
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto& r = ranges[members[i]];
    while (!stack.empty() && ranges[members[static_cast<std::size_t>(stack.back())]].end_ns <= r.start_ns)
      stack.pop_back();
    if (!stack.empty()) {
      const std::size_t p = members[static_cast<std::size_t>(stack.back())];
      lane.parent[i] = stack.back();
      self_ns[p] -= std::max<std::int64_t>(0, std::min(r.end_ns, ranges[p].end_ns) - r.start_ns);
    }
    stack.push_back(static_cast<long>(i));
  }
  return lane;
}

// The position in `lane` of the innermost range containing `t`, or -1.
long innermost(const std::vector<compat::ProfiledRange>& ranges, const Lane& lane, std::int64_t t) {
  const auto after = std::upper_bound(lane.order.begin(), lane.order.end(), t,
                                      [&](std::int64_t v, std::size_t i) { return v < ranges[i].start_ns; });
  long pos = static_cast<long>(after - lane.order.begin()) - 1;
  while (pos >= 0 && ranges[lane.order[static_cast<std::size_t>(pos)]].end_ns < t)
    pos = lane.parent[static_cast<std::size_t>(pos)];
  return pos;
}

using LaneKey = std::pair<std::string, std::uint64_t>;  // (where, thread)
using OpKey = std::pair<std::string, std::string>;      // (name, where)

// The ranges' span, first start to last end, in microseconds.
double span_us(const std::vector<compat::ProfiledRange>& ranges) {
  std::int64_t first = 0, last = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    first = i ? std::min(first, ranges[i].start_ns) : ranges[i].start_ns;
    last = i ? std::max(last, ranges[i].end_ns) : ranges[i].end_ns;
  }
  return static_cast<double>(last - first) / 1e3;
}

// The ranges nested per thread (or stream); `self_ns` gets each range's time less its children's.
std::map<LaneKey, Lane> nest_lanes(const std::vector<compat::ProfiledRange>& ranges, std::vector<std::int64_t>& self_ns) {
  std::map<LaneKey, std::vector<std::size_t>> lanes_of;
  for (std::size_t i = 0; i < ranges.size(); ++i) lanes_of[{ranges[i].where, ranges[i].thread}].push_back(i);
  self_ns.assign(ranges.size(), 0);
  for (std::size_t i = 0; i < ranges.size(); ++i)
    self_ns[i] = std::max<std::int64_t>(0, ranges[i].end_ns - ranges[i].start_ns);
  std::map<LaneKey, Lane> lanes;
  for (auto& [key, members] : lanes_of) lanes.emplace(key, nest(ranges, std::move(members), self_ns));
  return lanes;
}

// A table's rows: the entries of `by_op` named after their keys, the largest `size` first (ties
// by name), at most `top` of them; an entry `keep` refuses is left out.
template <typename Row, typename Size, typename Keep>
std::vector<Row> top_rows(std::map<OpKey, Row>& by_op, std::size_t top, Size size, Keep keep) {
  std::vector<Row> rows;
  for (auto& [key, row] : by_op) {
    if (!keep(row)) continue;
    row.name = key.first;
    row.where = key.second;
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [&size](const Row& a, const Row& b) {
    return size(a) != size(b) ? size(a) > size(b) : a.name < b.name;
  });
  if (rows.size() > top) rows.resize(top);
  return rows;
}

// Calls, self and total time per operation and place, the most self time first.
std::vector<OpTime> op_times(const std::vector<compat::ProfiledRange>& ranges, const std::vector<std::int64_t>& self_ns,
                             std::size_t top) {
  std::map<OpKey, OpTime> times;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    OpTime& t = times[{ranges[i].name, ranges[i].where}];
    ++t.calls;
    t.self_us += static_cast<double>(std::max<std::int64_t>(0, self_ns[i])) / 1e3;
    t.total_us += static_cast<double>(std::max<std::int64_t>(0, ranges[i].end_ns - ranges[i].start_ns)) / 1e3;
  }
  return top_rows(times, top, [](const OpTime& t) { return t.self_us; }, [](const OpTime&) { return true; });
}

// Allocations are made by host threads: charged to the innermost host range around them. The
// operations that allocated most first (those that only freed are left out).
std::vector<OpMemory> op_memory(const compat::ProfiledRun& run, const std::map<LaneKey, Lane>& lanes, std::size_t top) {
  std::map<OpKey, OpMemory> memory;
  for (const auto& a : run.allocs) {
    const auto lane = lanes.find({"cpu", a.thread});
    if (lane == lanes.end()) continue;
    const long pos = innermost(run.ranges, lane->second, a.at_ns);
    if (pos < 0) continue;
    OpMemory& m = memory[{run.ranges[lane->second.order[static_cast<std::size_t>(pos)]].name, a.where}];
    if (a.bytes > 0) {
      ++m.allocations;
      m.bytes += a.bytes;
    }
    m.net_bytes += a.bytes;
  }
  return top_rows(memory, top, [](const OpMemory& m) { return m.bytes; }, [](const OpMemory& m) { return m.bytes != 0; });
}

TraceSummary summarize(const compat::ProfiledRun& run, const TraceOptions& options) {
  TraceSummary s;
  s.path = options.path;
  s.memory = options.memory;
  s.events = static_cast<std::int64_t>(run.ranges.size() + run.allocs.size());
  s.span_us = span_us(run.ranges);
  std::vector<std::int64_t> self_ns;
  const std::map<LaneKey, Lane> lanes = nest_lanes(run.ranges, self_ns);
  s.top_by_self_time = op_times(run.ranges, self_ns, options.top);
  s.top_by_memory = op_memory(run, lanes, options.top);
  return s;
}

}  // namespace

void check_trace_path(const std::string& path) {
  if (path.empty()) refuse_path(path, "no file name");
  std::error_code ec;
  const fs::path file(path);
  if (fs::is_directory(file, ec)) refuse_path(path, "it is a directory");
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  if (!fs::exists(dir, ec)) refuse_path(path, "directory '" + dir.string() + "' does not exist");
  if (!fs::is_directory(dir, ec)) refuse_path(path, "'" + dir.string() + "' is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    refuse_path(path, "directory '" + dir.string() + "' is not writable (" + std::strerror(errno) + ")");
  if (fs::exists(file, ec) && ::access(file.c_str(), W_OK) != 0)
    refuse_path(path, std::string("the file is not writable (") + std::strerror(errno) + ")");
}

Trace::Trace() : state_(std::make_unique<State>()) {}

Trace::~Trace() {
  // LibTorch's profiler state is per thread: a session can only be stopped where it started.
  if (state_->session && state_->thread != std::this_thread::get_id()) state_->session->abandon();
}

bool Trace::running() const { return state_->session != nullptr; }

void Trace::start(const TraceOptions& options) {
  if (running()) throw std::logic_error("trace: already running (stop() it first)");
  check_trace_path(options.path);
  if (compat::profiler_on())
    throw std::logic_error("trace: a LibTorch profiler is already on in this thread; one at a time");
  try {
    state_->session =
        std::make_unique<compat::ProfilerSession>(options.memory, options.device, options.legacy_profiler);
  } catch (const c10::Error& e) {
    throw std::runtime_error(std::string("trace: LibTorch's profiler did not start: ") + e.what_without_backtrace());
  }
  state_->options = options;
  state_->thread = std::this_thread::get_id();
}

TraceSummary Trace::stop() {
  if (!running()) throw std::logic_error("trace: not running");
  if (state_->thread != std::this_thread::get_id())
    throw std::logic_error("trace: stop() must be called on the thread that called start()");
  const TraceOptions& o = state_->options;
  const std::unique_ptr<compat::ProfilerSession> session = std::move(state_->session);
  const std::string profiler = session->profiler();
  compat::ProfiledRun run;
  try {
    run = session->finish(o.path);
  } catch (const c10::Error& e) {
    throw std::runtime_error("trace: writing '" + o.path + "' failed: " + e.what_without_backtrace());
  }
  std::error_code ec;
  if (!fs::is_regular_file(o.path, ec) || fs::file_size(o.path, ec) == 0)
    throw std::runtime_error("trace: LibTorch's profiler wrote no trace to '" + o.path + "'");
  TraceSummary s = summarize(run, o);
  s.profiler = profiler;
  return s;
}

}  // namespace accelkit
