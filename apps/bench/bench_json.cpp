// bench_json: the result as one JSON object, keys in a fixed order (no JSON library in core).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>

#include "accelkit/bench.hpp"

namespace accelkit {

namespace {

class Writer {
 public:
  explicit Writer(int indent) : indent_(indent) {}

  Writer& open(const char* key = nullptr) { return begin(key, '{'); }
  Writer& open_array(const char* key) { return begin(key, '['); }
  Writer& close() {
    const char c = stack_.back();
    const bool empty = !has_item_;
    stack_.pop_back();
    if (!empty) newline();
    out_ << (c == '{' ? '}' : ']');
    has_item_ = true;
    return *this;
  }

  Writer& field(const char* key, const std::string& v) {
    prefix(key);
    string(v);
    return *this;
  }
  Writer& field(const char* key, const char* v) { return field(key, std::string(v)); }
  Writer& field(const char* key, bool v) { return raw(key, v ? "true" : "false"); }
  Writer& field(const char* key, int v) { return raw(key, std::to_string(v)); }
  Writer& field(const char* key, std::int64_t v) { return raw(key, std::to_string(v)); }
  Writer& field(const char* key, double v) {
    prefix(key);
    number(v);
    return *this;
  }
  Writer& null(const char* key) { return raw(key, "null"); }
  Writer& element(double v) { return field(nullptr, v); }
  // A field only where the value is present (no key at all otherwise).
  Writer& field_if(const char* key, const std::optional<double>& v) { return v ? field(key, *v) : *this; }
  // The value, or null where it is not known.
  template <typename T>
  Writer& field_or_null(const char* key, const T& v, bool known) {
    return known ? field(key, v) : null(key);
  }

  std::string str() const { return out_.str(); }

 private:
  Writer& begin(const char* key, char c) {
    if (!stack_.empty()) prefix(key);
    out_ << c;
    stack_.push_back(c);
    has_item_ = false;
    return *this;
  }
  Writer& raw(const char* key, const std::string& text) {
    prefix(key);
    out_ << text;
    return *this;
  }
  void prefix(const char* key) {
    if (has_item_) out_ << ',';
    if (!stack_.empty()) newline();
    if (key) {
      string(key);
      out_ << (indent_ > 0 ? ": " : ":");
    }
    has_item_ = true;
  }
  void newline() {
    if (indent_ <= 0) return;
    out_ << '\n' << std::string(stack_.size() * static_cast<std::size_t>(indent_), ' ');
  }
  void number(double v) {
    if (!std::isfinite(v)) {
      out_ << "null";
      return;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    out_ << buf;
  }
  void string(const std::string& s) {
    out_ << '"';
    for (unsigned char c : s) {
      switch (c) {
        case '"': out_ << "\\\""; break;
        case '\\': out_ << "\\\\"; break;
        case '\n': out_ << "\\n"; break;
        case '\t': out_ << "\\t"; break;
        case '\r': out_ << "\\r"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out_ << buf;
          } else {
            out_ << c;
          }
      }
    }
    out_ << '"';
  }

  int indent_;
  std::ostringstream out_;
  std::string stack_;
  bool has_item_ = false;
};

void variant(Writer& w, const char* key, const BenchVariant& v) {
  w.open(key)
      .field("median_ms", v.time.median_ms)
      .field("min_ms", v.time.min_ms)
      .field("max_ms", v.time.max_ms)
      .field("forward_ms", v.forward_ms)
      .field("backward_ms", v.backward_ms)
      .field("optimizer_ms", v.optimizer_ms)
      .field("threads", v.threads)
      .field("dtype", v.dtype)
      .field("blas", v.blas)
      .field("matmuls", v.matmuls)
      .field("loss_scaling", v.loss_scaling)
      .field("optimizer", v.optimizer)
      .field("step_mode", v.step_mode)
      .field("description", v.description)
      .field_if("rel_error", v.rel_error)
      .field_if("cosine", v.cosine)
      .field_or_null("step_peak_bytes", static_cast<std::int64_t>(v.step_peak_bytes.value_or(0)), v.step_peak_bytes.has_value());
  if (!v.step_peak_note.empty()) w.field("step_peak_note", v.step_peak_note);
  w.open_array("samples_ms");
  for (double s : v.time.samples_ms) w.element(s);
  w.close();
  w.open_array("check");
  for (double c : v.check) w.element(c);
  w.close();
  w.close();
}

void candidate(Writer& w, const TuneCandidate& c) {
  w.field("precision", std::string(to_string(c.precision)))
      .field("fused_optimizer", std::string(c.fused ? "on" : "off"))
      .field("threads", c.threads);
}

void autotune(Writer& w, const TuneDecision& d) {
  w.open("autotune").field("origin", d.origin).field("cache_file", d.cache_file).field("key", d.key);
  w.open("chosen");
  candidate(w, d.chosen);
  w.close().field("why", d.why).field("created", d.created).field("space", d.space);
  w.open_array("trials");
  for (const TuneTrial& t : d.trials) {
    w.open();
    candidate(w, t.candidate);
    w.field("reference", t.reference)
        .field("median_ms", t.median_ms)
        .field("rel_diff", t.rel_diff)
        .field("accepted", t.accepted)
        .field("note", t.note)
        .close();
  }
  w.close().close();
}

void batch_decision(Writer& w, const BatchDecision& d) {
  auto bytes = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  w.open("batch_finder")
      .field("batch", d.batch)
      .field("largest", d.largest)
      .field("memory_at_largest_bytes", bytes(d.memory_at_largest))
      .field("budget_bytes", bytes(d.budget))
      .field("margin_pct", d.margin_pct)
      .field("method", d.method)
      .field("origin", d.origin)
      .field("cache_file", d.cache_file)
      .field("why", d.why);
  w.open_array("trials");
  for (const BatchTrial& t : d.trials)
    w.open().field("batch", t.batch).field("fits", t.fits).field("peak_bytes", bytes(t.peak_bytes)).field("note", t.note).close();
  w.close().close();
}

void step_tuning(Writer& w, const StepTuningStatus& st) {
  const char* state = st.state == StepTuningStatus::State::decided    ? "decided"
                      : st.state == StepTuningStatus::State::observing ? "observing"
                                                                       : "off";
  w.open("step_tuning").field("state", std::string(state));
  if (st.state == StepTuningStatus::State::decided) w.field("chosen", st.candidates[st.chosen].label());
  w.field("source", st.source).field("why", st.why).field("steps_observed", st.steps_seen);
  w.open_array("candidates");
  for (std::size_t i = 0; i < st.candidates.size(); ++i) {
    w.open().field("label", st.candidates[i].label()).field("autocast", st.candidates[i].autocast)
        .field("threads", st.candidates[i].threads);
    if (i < st.median_ms.size()) w.field("median_ms", st.median_ms[i]);
    w.close();
  }
  w.close().close();
}

// The keys of train --json's trace event (apps/accelkit/trace_out.cpp).
void trace(Writer& w, const TraceSummary& s, const std::string& steps) {
  w.open("trace")
      .field("path", s.path)
      .field("profiler", s.profiler)
      .field("steps", steps)
      .field("events", s.events)
      .field("span_us", s.span_us)
      .field("memory", s.memory);
  w.open_array("top_by_self_time");
  for (const OpTime& t : s.top_by_self_time)
    w.open().field("name", t.name).field("where", t.where).field("calls", t.calls).field("self_us", t.self_us)
        .field("total_us", t.total_us).close();
  w.close();
  w.open_array("top_by_memory");
  for (const OpMemory& m : s.top_by_memory)
    w.open().field("name", m.name).field("where", m.where).field("allocations", m.allocations).field("bytes", m.bytes)
        .field("net_bytes", m.net_bytes).close();
  w.close().close();
}

// What ran where: the model and its shape, the device, LibTorch, the run's length.
void run_facts(Writer& w, const BenchResult& r) {
  w.field("model", r.model)
      .field("mode", r.mode)
      .field("shape", r.shape)
      .field("device", r.device)
      .field("torch_device", r.torch_device)
      .field("torch_version", r.torch_version)
      .field("batch", r.batch)
      .field("width", r.width)
      .field("params", r.params)
      .field("steps", r.steps)
      .field("warmup", r.warmup);
}

// The variants side by side, the speedups between them, and the operators that fell back.
void comparison(Writer& w, const BenchResult& r) {
  variant(w, "baseline", r.baseline);
  variant(w, "accelkit", r.accelkit);
  if (r.tuned) variant(w, "tuned", *r.tuned);
  if (r.eager) variant(w, "eager", *r.eager);
  if (r.int8) variant(w, "int8", *r.int8);
  w.field("speedup", r.speedup)
      .field("speedup_min", r.speedup_min)
      .field_if("speedup_vs_tuned", r.speedup_vs_tuned)
      .field_if("speedup_vs_eager", r.speedup_vs_eager);
  if (!r.fallbacks.empty()) {
    w.open("fallbacks");
    for (const auto& [op, n] : r.fallbacks) w.field(op.c_str(), static_cast<std::int64_t>(n));
    w.close();
  }
}

void machine_floor(Writer& w, const BenchFloor& f) {
  w.open("floor")
      .field("copy_gbps", f.copy_gbps)
      .field("inplace_gbps", f.inplace_gbps)
      .field("matmul_dtype", f.matmul_dtype)
      .field("matmul_n", f.matmul_n)
      .field("matmul_tflops", f.matmul_tflops)
      .field("slower_matmul_dtype", f.slower_matmul_dtype)
      .field("slower_matmul_tflops", f.slower_matmul_tflops)
      .field("slower_matmul_n", f.slower_matmul_n)
      .field("step_flops", f.step_flops)
      .field("optimizer_bytes", f.optimizer_bytes)
      .field("matmul_ms", f.matmul_ms)
      .field("optimizer_ms", f.optimizer_ms)
      .field("optimizer_inplace_ms", f.optimizer_inplace_ms)
      .field("floor_ms", f.floor_ms)
      .field("measured_over_floor", f.measured_over_floor)
      .field("floor_over_measured", f.floor_over_measured)
      .field("note", f.note)
      .field("how", f.how)
      .field("left_out", f.left_out)  // not empty: floor_ms is no lower bound for this run
      .close();
}

void data_feed(Writer& w, const BenchData& d) {
  w.open("data").field("producer_ms", d.producer_ms).field("prefetch", d.prefetch).field("block_steps", d.block_steps)
      .field("accelkit_wait_ms", d.accelkit_wait_ms).field("accelkit_produce_ms", d.accelkit_produce_ms).close();
}

void inference_decision(Writer& w, const InferenceDecision& d) {
  w.open("inference").field("chosen", d.chosen).field("description", d.description).field("why", d.why)
      .field("origin", d.origin).field("cache_file", d.cache_file);
  w.open_array("trials");
  for (const InferenceTrial& t : d.trials)
    w.open().field("candidate", t.candidate).field("median_ms", t.median_ms).field("rel_error", t.rel_error)
        .field("cosine", t.cosine).field("accepted", t.accepted).field("note", t.note).close();
  w.close().close();
}

// `speedup`: the int8 variant's over the baseline, when it was timed.
void quantize_report(Writer& w, const QuantizeReport& q, const std::optional<double>& speedup) {
  w.open("quantize").field("engine", q.engine).field("reduce_range", q.reduce_range).field("scheme", q.scheme)
      .field("converted", q.converted).field("skipped", q.skipped).field("bytes_before", q.bytes_before)
      .field("bytes_after", q.bytes_after).field_if("speedup", speedup).field_if("rel_error", q.rel_error)
      .field_if("max_rel_error", q.max_rel_error).field_if("cosine", q.cosine);
  w.open_array("notes");
  for (const std::string& n : q.notes) w.field(nullptr, n);
  w.close();
  w.open_array("layers");
  for (const QuantizedLayer& l : q.layers)
    w.open().field("name", l.name).field("kind", l.kind).field("in_features", l.in_features).field("out_features", l.out_features)
        .field("converted", l.converted).field("why", l.why).close();
  w.close().close();
}

void decision_list(Writer& w, const std::vector<RuntimeDecision>& decisions) {
  w.open_array("decisions");
  for (const RuntimeDecision& d : decisions)
    w.open().field("key", d.key).field("value", d.value).field("source", d.source).field("why", d.why).close();
  w.close();
}

void machine_facts(Writer& w, const BenchMachine& m) {
  w.open("machine").field("logical_cores", m.logical_cores).field("threads_used", m.threads_used)
      .field_or_null("other_cores_before", m.other_cores_before, m.other_cores_before >= 0)
      .field_or_null("other_cores_during", m.other_cores_during, m.other_cores_during >= 0)
      .field("busy", m.busy).field("note", m.note).field("waited", m.waited).close();
}

void load_averages(Writer& w, const BenchResult& r) {
  w.open("load_average")
      .field_or_null("before", r.load_before, r.load_before >= 0)
      .field_or_null("after", r.load_after, r.load_after >= 0)
      .close();
}

}  // namespace

std::string bench_json(const BenchResult& r, int indent) {
  Writer w(indent);
  w.open();
  run_facts(w, r);
  comparison(w, r);
  if (r.floor.measured) machine_floor(w, r.floor);
  else w.null("floor");
  w.field("memory_source", r.memory_source);
  if (r.data) data_feed(w, *r.data);
  else w.null("data");
  w.open("accuracy")
      .field("compared", r.accuracy.compared)
      .field("steps", r.accuracy.steps)
      .field("rel_diff", r.accuracy.rel_diff)
      .field("tolerance", r.accuracy.tolerance)
      .field("ok", r.accuracy.ok)
      .field_if("tuned_rel_diff", r.accuracy.tuned_rel_diff)
      .field_if("rounding_spread", r.accuracy.rounding_spread)
      .field_if("cosine", r.accuracy.cosine)
      .field("why", r.accuracy.why)
      .close();
  if (r.inference) inference_decision(w, *r.inference);
  else w.null("inference");
  w.open_array("not_timed");
  for (const std::string& n : r.not_timed) w.field(nullptr, n);
  w.close();
  if (r.trace) trace(w, *r.trace, r.trace_steps);
  else w.null("trace");
  if (r.quantize) quantize_report(w, *r.quantize, r.speedup_int8);
  if (r.autotune) autotune(w, *r.autotune);
  else w.null("autotune");
  if (r.step_tuning) step_tuning(w, *r.step_tuning);
  else w.null("step_tuning");
  if (r.batch_finder) batch_decision(w, *r.batch_finder);
  else w.null("batch_finder");
  decision_list(w, r.decisions);
  machine_facts(w, r.machine);
  load_averages(w, r);
  if (!r.error.empty()) w.field("error", r.error);
  w.close();
  return w.str();
}

}  // namespace accelkit
