// accelkit::Trace and accelkit::profile_scope (core/memory/include/accelkit/trace.hpp): training steps
// of a small Linear model traced with each profiler this LibTorch has (Kineto where it is, and
// the legacy one everywhere) give a JSON file with aten operations and the caller's scope, and
// tables whose figures hold together; profile_scope records nothing without a profiler; paths
// that cannot be written are refused before anything starts.
#include "torch_doctest.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <accelkit/sdk/torch_compat_profiler.hpp>
#include <accelkit/trace.hpp>

#include "test_support.hpp"

namespace trace_suite {

using accelkit::OpMemory;
using accelkit::OpTime;
using accelkit::profile_scope;
using accelkit::Trace;
using accelkit::TraceOptions;
using accelkit::TraceSummary;
using accelkit::test::TempDir;

struct Model {
  torch::nn::Sequential net{torch::nn::Linear(32, 64), torch::nn::ReLU(), torch::nn::Linear(64, 8)};
  torch::optim::SGD opt{net->parameters(), torch::optim::SGDOptions(0.01)};
  at::Tensor x = at::randn({16, 32});
  at::Tensor y = at::randn({16, 8});

  void step() {
    opt.zero_grad();
    at::mse_loss(net->forward(x), y).backward();
    opt.step();
  }
};

// The names of the trace file's events: Kineto writes {"traceEvents": [...]}, the legacy
// profiler's writer a bare array. Throws when the file is not JSON.
std::multiset<std::string> event_names(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  const nlohmann::json& events = j.is_array() ? j : j.at("traceEvents");
  std::multiset<std::string> names;
  for (const auto& e : events)
    if (e.contains("name") && e["name"].is_string()) names.insert(e["name"].get<std::string>());
  return names;
}

const OpTime* row(const TraceSummary& s, const std::string& name) {
  for (const auto& r : s.top_by_self_time)
    if (r.name == name && r.where == "cpu") return &r;
  return nullptr;
}

TEST_CASE("a trace of training steps: a JSON file with aten operations and the scope, tables that hold together") {
  TempDir dir("accelkit-trace");
  Model m;
  m.step();  // warm-up: first-call costs stay out of the trace

  std::vector<bool> legacy{true};
  if (accelkit::compat::kineto_available()) legacy.push_back(false);
  for (const bool use_legacy : legacy) {
    CAPTURE(use_legacy);
    TraceOptions o;
    o.path = (dir.path() / (use_legacy ? "legacy.json" : "kineto.json")).string();
    o.legacy_profiler = use_legacy;
    o.top = 1000;  // every row, to check the nesting below
    Trace trace;
    trace.start(o);
    CHECK(trace.running());
    for (int i = 0; i < 3; ++i) {
      // A name made at run time, freed before stop(), with characters JSON must escape: recorded
      // as "train 'step' / one".
      const std::string name = std::string("train \"step\" \\ ") + "one";
      profile_scope scope(name);
      CHECK(scope.recorded());
      m.step();
    }
    const TraceSummary s = trace.stop();
    CHECK_FALSE(trace.running());
    CHECK_FALSE(accelkit::compat::profiler_on());
    CHECK(s.path == o.path);
    CHECK(s.profiler.find(use_legacy ? "legacy" : "Kineto") != std::string::npos);

    std::multiset<std::string> names;
    REQUIRE_NOTHROW(names = event_names(o.path));
    CHECK(names.count("train 'step' / one") == 3);
    CHECK((names.count("aten::addmm") + names.count("aten::mm")) >= 3);

    // Self time: sorted, never above the total; a range with ranges nested in it has less self
    // time than total (the scope holds the whole step; aten::mse_loss holds its reduction).
    REQUIRE_FALSE(s.top_by_self_time.empty());
    CHECK(s.events >= static_cast<std::int64_t>(s.top_by_self_time.size()));
    CHECK(s.span_us > 0);
    for (std::size_t i = 0; i < s.top_by_self_time.size(); ++i) {
      const OpTime& r = s.top_by_self_time[i];
      CAPTURE(r.name);
      CHECK(r.calls >= 1);
      CHECK(r.self_us >= 0);
      CHECK(r.self_us <= r.total_us + 1e-6);
      if (i) CHECK(s.top_by_self_time[i - 1].self_us >= r.self_us);
    }
    const OpTime* scope = row(s, "train 'step' / one");
    REQUIRE(scope);
    CHECK(scope->calls == 3);
    CHECK(scope->self_us < scope->total_us);
    const OpTime* loss = row(s, "aten::mse_loss");
    REQUIRE(loss);
    CHECK(loss->calls == 3);
    CHECK(loss->self_us < loss->total_us);
    // The scope holds every operation of the three steps: the Linear layers' forward among them.
    const OpTime* addmm = row(s, "aten::addmm");
    REQUIRE(addmm);
    CHECK(addmm->calls == 6);
    CHECK(addmm->total_us <= scope->total_us);

    // Memory: the step allocates (activations, gradients); sorted, only rows that allocated.
    CHECK(s.memory);
    REQUIRE_FALSE(s.top_by_memory.empty());
    for (std::size_t i = 0; i < s.top_by_memory.size(); ++i) {
      const OpMemory& r = s.top_by_memory[i];
      CAPTURE(r.name);
      CHECK(r.bytes > 0);
      CHECK(r.allocations >= 1);
      CHECK(r.net_bytes <= r.bytes);
      CHECK(r.where == "cpu");
      if (i) CHECK(s.top_by_memory[i - 1].bytes >= r.bytes);
    }
    // The forward's output of the first Linear: 16 x 64 floats, allocated by an aten op.
    const auto addmm_mem = std::find_if(s.top_by_memory.begin(), s.top_by_memory.end(),
                                        [](const OpMemory& r) { return r.name == "aten::addmm"; });
    REQUIRE(addmm_mem != s.top_by_memory.end());
    CHECK(addmm_mem->bytes >= 3 * 16 * 64 * 4);
  }
}

TEST_CASE("the tables keep the top rows only, and memory can be left out") {
  TempDir dir("accelkit-trace");
  Model m;
  m.step();
  TraceOptions o;
  o.path = (dir.path() / "top.json").string();
  o.top = 3;
  o.memory = false;
  Trace trace;
  trace.start(o);
  m.step();
  const TraceSummary s = trace.stop();
  CHECK(s.top_by_self_time.size() == 3);
  CHECK_FALSE(s.memory);
  CHECK(s.top_by_memory.empty());
}

TEST_CASE("profile_scope records nothing without a profiler") {
  CHECK_FALSE(accelkit::compat::profiler_on());
  profile_scope scope("outside any trace");
  CHECK_FALSE(scope.recorded());
  profile_scope by_string(std::string("also outside"));
  CHECK_FALSE(by_string.recorded());
}

TEST_CASE("one trace at a time; stop() where it started") {
  TempDir dir("accelkit-trace");
  TraceOptions o;
  o.path = (dir.path() / "one.json").string();
  Trace trace;
  CHECK_THROWS_AS(trace.stop(), std::logic_error);
  trace.start(o);
  CHECK_THROWS_AS(trace.start(o), std::logic_error);
  Trace other;
  CHECK_THROWS_AS(other.start(o), std::logic_error);  // a profiler is on in this thread
  CHECK_FALSE(other.running());
  bool refused = false;
  std::thread([&] {
    try {
      trace.stop();
    } catch (const std::logic_error&) {
      refused = true;
    }
  }).join();
  CHECK(refused);
  CHECK(trace.running());
  { profile_scope scope("after the refusal"); at::ones({4}).sum(); }
  const TraceSummary s = trace.stop();
  CHECK(row(s, "after the refusal"));
  CHECK_FALSE(accelkit::compat::profiler_on());

  // A Trace dropped while it runs stops the profiler.
  {
    Trace dropped;
    dropped.start(o);
    CHECK(accelkit::compat::profiler_on());
  }
  CHECK_FALSE(accelkit::compat::profiler_on());
}

TEST_CASE("a path that cannot be written is refused before the profiler starts") {
  TempDir dir("accelkit-trace");
  const std::string file = (dir.path() / "plain-file").string();
  std::ofstream(file) << "x";
  const std::vector<std::pair<std::string, std::string>> bad{
      {"", "no file name"},
      {(dir.path() / "missing" / "t.json").string(), "does not exist"},
      {dir.str(), "is a directory"},
      {file + "/t.json", "is not a directory"},
  };
  for (const auto& [path, why] : bad) {
    CAPTURE(path);
    try {
      accelkit::check_trace_path(path);
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(why) != std::string::npos);
    }
    Trace trace;
    TraceOptions o;
    o.path = path;
    CHECK_THROWS_AS(trace.start(o), std::invalid_argument);
    CHECK_FALSE(trace.running());
    CHECK_FALSE(accelkit::compat::profiler_on());
  }
  CHECK_NOTHROW(accelkit::check_trace_path((dir.path() / "new.json").string()));
  CHECK_NOTHROW(accelkit::check_trace_path(file));  // an existing file is overwritten
  // Permissions bind everyone but root.
  if (::geteuid() != 0) {
    const auto locked = dir.make_dir("locked");
    std::filesystem::permissions(locked, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    try {
      accelkit::check_trace_path((locked / "t.json").string());
      FAIL("accepted a directory without write permission");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("not writable") != std::string::npos);
    }
  }
}

}  // namespace trace_suite
