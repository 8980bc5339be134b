// accelkit bench: accelkit's negotiated settings against plain (and hand-tuned) LibTorch on a
// reference model, in one process; a table or --json, progress on stderr.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include <ATen/Parallel.h>
#include <unistd.h>

#include "accelkit/bench.hpp"
#include "accelkit/memory_scope.hpp"
#include "accelkit/runtime.hpp"
#include "cli.hpp"
#include "format.hpp"
#include "render.hpp"
#include "render_autotune.hpp"
#include "render_batch.hpp"
#include "table.hpp"
#include "trace_out.hpp"

namespace accelkit::cli {

int run_bench(const ContextOptions& options, const BenchOptions& bench, bool json);

namespace {

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", v);
  return buf;
}

std::string load_text(double l) { return l >= 0 ? fixed(l, 2) : "?"; }

void add_variant(Table& t, const BenchVariant& v, double baseline_ms, bool phases, bool blas) {
  const BenchStats& s = v.time;
  std::vector<std::string> row{v.name, std::to_string(v.threads), v.dtype};
  if (blas) row.push_back(v.matmuls.empty() ? "-" : v.matmuls);
  row.insert(row.end(), {v.optimizer, fixed(s.median_ms, 1), fixed(s.min_ms, 1), fixed(s.max_ms, 1)});
  if (phases && v.step_mode == "graph") {
    row.insert(row.end(), {"-", "-", "-"});  // one replay: no phases
  } else if (phases) {
    row.push_back(fixed(v.forward_ms, 1));
    row.push_back(fixed(v.backward_ms, 1));
    row.push_back(fixed(v.optimizer_ms, 1));
  }
  row.push_back(s.median_ms > 0 ? fixed(baseline_ms / s.median_ms, 2) + "x" : "-");
  t.add_row(std::move(row));
}

void render_check(std::ostream& out, const BenchResult& r) {
  const BenchAccuracy& a = r.accuracy;
  if (r.mode == "infer")
    out << "accuracy: outputs on the same inputs, accelkit vs baseline: " << sci(a.rel_diff) << " relative"
        << (a.cosine ? ", cosine " + fixed(*a.cosine, 5) : std::string()) << " (tolerance " << sci(a.tolerance) << ": "
        << (a.ok ? "ok" : "FAILED") << ")";
  else
    out << "accuracy: " << a.compared << " after " << a.steps << " steps from identical weights and data, accelkit vs "
        << "baseline: " << sci(a.rel_diff) << " relative (tolerance " << sci(a.tolerance) << ": "
        << (a.ok ? "ok" : "FAILED") << ")";
  if (a.tuned_rel_diff) out << "; tuned vs baseline " << sci(*a.tuned_rel_diff);
  if (a.rounding_spread) out << "; the baseline's own loss under rounding noise " << sci(*a.rounding_spread);
  out << "\n  why this tolerance: " << a.why << '\n';
}

// The floor: what the step cannot beat on this machine's measured rates, or why it is left out.
void render_floor(std::ostream& out, const BenchResult& r) {
  const BenchFloor& f = r.floor;
  if (!f.measured) return;
  const bool in_place = f.optimizer_inplace_ms <= f.optimizer_ms;
  const std::string slower_size =
      f.slower_matmul_n && f.slower_matmul_n != f.matmul_n ? " on " + std::to_string(f.slower_matmul_n) + "^3" : "";
  const std::string rates =
      (f.step_flops > 0 ? f.matmul_dtype + " " + std::to_string(f.matmul_n) + "^3 mm " + flop_rate(f.matmul_tflops) +
                              " (" + f.slower_matmul_dtype + ": " + flop_rate(f.slower_matmul_tflops) + slower_size + "), "
                        : std::string()) +
      "copy " + fixed(f.copy_gbps, 1) + " GB/s, in place " + fixed(f.inplace_gbps, 1) + " GB/s";
  if (!f.left_out.empty()) {
    out << "floor: left out - " << f.left_out << "\n  rates: " << rates << " (" << f.how << ")\n\n";
    return;
  }
  out << "floor (" << f.note << "):\n";
  if (f.step_flops > 0)
    out << "  matmuls    " << fixed(f.step_flops / 1e9, 1) << " GFLOP at " << flop_rate(f.matmul_tflops) << " ("
        << f.matmul_dtype << ' ' << f.matmul_n << "^3 mm, the faster of fp32 and bf16; " << f.slower_matmul_dtype << ": "
        << flop_rate(f.slower_matmul_tflops) << slower_size << ")  = " << fixed(f.matmul_ms, 1) << " ms\n";
  out << "  optimizer  " << fixed(f.optimizer_bytes / 1e6, 0) << " MB at "
      << fixed(in_place ? f.inplace_gbps : f.copy_gbps, 1) << " GB/s (" << (in_place ? "in place" : "copy")
      << ", the faster)  = " << fixed(std::min(f.optimizer_ms, f.optimizer_inplace_ms), 1) << " ms   ["
      << (in_place ? "copy " : "in place ") << fixed(in_place ? f.copy_gbps : f.inplace_gbps, 1) << " GB/s: "
      << fixed(std::max(f.optimizer_ms, f.optimizer_inplace_ms), 1) << " ms]\n"
      << "  floor " << fixed(f.floor_ms, 1) << " ms; accelkit " << fixed(r.accelkit.time.median_ms, 1)
      << " ms = " << fixed(f.measured_over_floor, 2) << "x the floor (floor/measured " << fixed(f.floor_over_measured, 2)
      << "); rates: " << f.how << "\n\n";
}

// What was timed, and the variants' table: phases when the step has them, the matmuls' library
// when the device names it.
void render_variants(std::ostream& out, const BenchResult& r) {
  out << "accelkit bench: " << r.model << " - " << r.shape << " (" << fixed(r.params / 1e6, 1) << "M params)\n"
      << "device " << r.device << " (LibTorch " << r.torch_version << "); " << r.steps << " timed steps after "
      << r.warmup << " warm-up, variants alternating every round; load average " << load_text(r.load_before)
      << " -> " << load_text(r.load_after) << "\n\n";
  // Phases (medians): zero_grad + forward + loss, backward, optimizer step.
  const bool phases = r.model != "optimizer" && r.mode == "train" && !r.data;  // --data-ms times whole blocks
  // What runs the matmuls: a column when the device names it (a CPU's BLAS, oneDNN).
  const bool blas = !r.baseline.matmuls.empty() || !r.accelkit.matmuls.empty();
  std::vector<std::string> headers{"variant", "threads", "dtype"};
  if (blas) headers.push_back("matmuls");
  headers.insert(headers.end(), {"optimizer", "median ms", "min ms", "max ms"});
  if (phases) headers.insert(headers.end(), {"fwd ms", "bwd ms", "opt ms"});
  headers.push_back("speedup");
  Table t(headers);
  t.right_align(1);
  for (std::size_t c = blas ? 5 : 4; c < headers.size(); ++c) t.right_align(c);
  const double base = r.baseline.time.median_ms;
  add_variant(t, r.baseline, base, phases, blas);
  add_variant(t, r.accelkit, base, phases, blas);
  if (r.tuned) add_variant(t, *r.tuned, base, phases, blas);
  if (r.eager) add_variant(t, *r.eager, base, phases, blas);
  if (r.int8) add_variant(t, *r.int8, base, phases, blas);
  t.print(out);
  for (const std::string& n : r.not_timed) out << "not timed: " << n << '\n';
}

// How accelkit's step ran, and what step tuning chose.
void render_step_mode(std::ostream& out, const BenchResult& r) {
  out << "\naccelkit step: " << r.accelkit.step_mode << '\n';
  if (r.step_tuning) {
    const StepTuningStatus& st = *r.step_tuning;
    if (st.state == StepTuningStatus::State::decided)
      out << "step tuning: " << st.candidates[st.chosen].label() << " - " << st.why << " [" << st.source << "]\n";
    else out << "step tuning: off - " << st.why << '\n';
  }
}

// One step's peak memory over its start for each variant, or why there is none.
void render_step_memory(std::ostream& out, const BenchResult& r) {
  if (r.baseline.step_peak_bytes) {
    // 0 is a real figure here (an in-place optimizer step allocates nothing): said in words.
    auto bytes = [](std::uint64_t b) { return b ? format_bytes(b) : std::string("nothing"); };
    out << "memory: one step's peak over its start - baseline " << bytes(*r.baseline.step_peak_bytes);
    for (const BenchVariant* v : {&r.accelkit, r.tuned ? &*r.tuned : nullptr, r.eager ? &*r.eager : nullptr})
      if (v && v->step_peak_bytes) out << ", " << v->name << ' ' << bytes(*v->step_peak_bytes);
    out << " [" << r.memory_source << "]\n";
    for (const BenchVariant* v : {&r.accelkit, r.tuned ? &*r.tuned : nullptr, r.eager ? &*r.eager : nullptr})
      if (v && !v->step_peak_note.empty()) out << "  " << v->name << ": " << v->step_peak_note << '\n';
  } else if (!r.memory_source.empty()) {
    out << "memory: " << r.memory_source << '\n';
  }
}

// --data-ms: how long accelkit's steps waited for their batches.
void render_data_wait(std::ostream& out, const BenchResult& r) {
  if (!r.data) return;
  const BenchData& d = *r.data;
  const double step = r.accelkit.time.median_ms;
  out << "data: a producer of " << fixed(d.producer_ms, 2) << " ms of CPU work per batch feeds every step (blocks of "
      << d.block_steps << " steps); accelkit "
      << (d.prefetch > 0 ? "prefetches " + std::to_string(d.prefetch) + " batches" : std::string("produces in the step (prefetch 0)"))
      << ", the others produce in the step; accelkit's steps waited " << fixed(d.accelkit_wait_ms, 2)
      << " ms each for their batch (" << fixed(step > 0 ? 100 * d.accelkit_wait_ms / step : 0, 0) << "% of a step)"
      << (step > 0 && d.accelkit_wait_ms > 0.1 * step ? ": the input pipeline holds the training back" : "") << '\n';
  // A CPU-bound producer on a CPU whose cores all compute the step: they share the cores.
  if (d.prefetch > 0 && r.torch_device == "cpu" && r.accelkit.threads >= r.machine.logical_cores)
    out << "  the producer thread shares the " << r.machine.logical_cores << " cores the step's " << r.accelkit.threads
        << " threads compute on: a CPU-bound producer gains from prefetching only with a core of its own (--threads "
        << std::max(1, r.machine.logical_cores - 1) << ")\n";
}

// --quantize: the int8 model's speed and how far its outputs are from the baseline's.
void render_int8(std::ostream& out, const BenchResult& r) {
  if (!r.int8 || !r.quantize) return;
  out << "int8 is " << fixed(*r.speedup_int8, 2) << "x the baseline";
  if (r.tuned) out << ", " << fixed(r.tuned->time.median_ms / r.int8->time.median_ms, 2) << "x hand-tuned LibTorch";
  out << "; its outputs vs the baseline's: " << sci(r.int8->rel_error.value_or(0)) << " relative, cosine "
      << fixed(r.int8->cosine.value_or(0), 5) << " (lossy: shown, not judged)\n"
      << "quantize: " << r.quantize->summary() << '\n';
}

// What optimize_for_inference chose, and each candidate it tried.
void render_inference(std::ostream& out, const InferenceDecision& d) {
  out << "optimize_for_inference: " << d.chosen << " - " << d.description << " (" << d.origin
      << (d.cache_file.empty() ? "" : " " + d.cache_file) << ")\n  why: " << d.why << '\n';
  if (!d.trials.empty()) {
    Table c({"candidate", "ms", "rel. error", "cosine", "result"});
    c.right_align(1).right_align(2).right_align(3);
    for (const auto& trial : d.trials) {
      const bool ran = trial.median_ms > 0;
      c.add_row({trial.candidate, ran ? fixed(trial.median_ms, 2) : "-", ran ? sci(trial.rel_error) : "-",
                 ran ? fixed(trial.cosine, 5) : "-", trial.note});
    }
    c.print(out);
  }
  out << '\n';
}

// The operators the device left to the CPU, the first 12 with their calls.
void render_fallbacks(std::ostream& out, const BenchResult& r) {
  if (r.fallbacks.empty()) return;
  std::uint64_t total = 0;
  for (const auto& fallback : r.fallbacks) total += fallback.second;
  out << "fallback to the CPU (operators " << r.device << " does not run itself; " << total << " calls):\n ";
  std::size_t shown = 0;
  for (const auto& [op, n] : r.fallbacks) {
    if (shown++ == 12) {
      out << " ... " << (r.fallbacks.size() - 12) << " more";
      break;
    }
    out << ' ' << op << " x" << n;
  }
  out << "\n\n";
}

// The machine's warnings, then the verdict: accelkit against the baseline and the others.
void render_verdict(std::ostream& out, const BenchResult& r) {
  if (!r.machine.waited.empty()) out << "\nwarning: --wait-quiet: " << r.machine.waited << '\n';
  if (r.machine.busy) out << "\nwarning: " << r.machine.note << '\n';
  out << "\naccelkit is " << fixed(r.speedup, 2) << "x the baseline";
  if (r.speedup_vs_tuned) out << ", " << fixed(*r.speedup_vs_tuned, 2) << "x hand-tuned LibTorch";
  if (r.speedup_vs_eager)
    out << ", " << fixed(*r.speedup_vs_eager, 2) << "x its own step run eagerly (" << r.accelkit.step_mode << ")";
  out << " (medians; fastest steps: " << fixed(r.speedup_min, 2) << "x the baseline)\n";
}

void render(std::ostream& out, const BenchResult& r) {
  render_variants(out, r);
  render_step_mode(out, r);
  render_step_memory(out, r);
  render_data_wait(out, r);
  render_int8(out, r);
  render_floor(out, r);
  if (r.autotune) render_autotune(out, *r.autotune);
  if (r.batch_finder) render_batch_decision(out, *r.batch_finder);
  if (r.inference) render_inference(out, *r.inference);
  render_fallbacks(out, r);
  render_decisions(out, r.decisions);
  render_check(out, r);
  // The verdict, last.
  render_verdict(out, r);
}

void show_progress(const BenchProgress& p) {
  static const bool tty = isatty(STDERR_FILENO) == 1;
  static std::string last_phase;
  static std::string last_line;  // without a terminal, a line said once
  const bool phase_change = p.phase != last_phase;
  last_phase = p.phase;
  std::ostringstream line;
  line << "bench " << p.model << ": ";
  if (p.phase == "autotune") line << "auto-tune, " << (p.done < p.total ? "candidate " + std::to_string(p.done + 1) + '/' + std::to_string(p.total) : "done");
  else if (p.phase == "check") line << "accuracy check, variant " << p.done + 1 << '/' << p.total;
  else if (p.phase == "batch") line << "finding the batch, trial step " << p.detail;
  else if (p.phase == "quiet") line << "waiting for a quiet machine, " << p.done << '/' << p.total << " s";
  else if (p.phase == "quantize") line << "quantizing to int8";
  else if (p.phase == "optimize") line << "optimize_for_inference" << (p.total > 1 ? ", candidate " + std::to_string(std::min(p.done + 1, p.total)) + '/' + std::to_string(p.total) : std::string());
  else if (p.phase == "step tuning") line << "step tuning: timing the candidates on the model's steps, step " << p.done + 1;
  else if (p.phase == "floors") line << "measuring floors " << p.done + 1 << '/' << p.total;
  else if (p.phase == "floors again") line << "measuring the floor's rates again, after the timed steps";
  else if (p.phase == "warmup") line << "warm-up " << p.done + 1 << '/' << p.total;
  else line << "round " << std::min(p.done + 1, p.total) << '/' << p.total;
  const bool finished = p.phase == "timing" && p.done == p.total;
  if (tty) {
    std::cerr << '\r' << line.str() << "\033[K" << (finished ? "\r\033[K" : "") << std::flush;
  } else if (!finished && line.str() != last_line &&
             (phase_change || (p.phase != "timing" && p.phase != "quiet") ||
              p.done % (p.phase == "quiet" ? 10 : std::max(1, p.total / 10)) == 0)) {
    std::cerr << line.str() << '\n';
    last_line = line.str();
  }
}

}  // namespace

int run_bench(const ContextOptions& options, const BenchOptions& bench_in, bool json) {
  BenchOptions bench = bench_in;
  // The baseline runs at LibTorch's default thread count: read it before Runtime::start applies
  // the plan.
  if (bench.baseline_threads == 0) bench.baseline_threads = at::get_num_threads();
  try {
    validate(bench);
  } catch (const std::invalid_argument& e) {
    std::cerr << "accelkit: " << e.what() << "\nTry 'accelkit help bench'.\n";
    return kExitUsage;
  }

  std::unique_ptr<Runtime> rt;
  try {
    rt = Runtime::start(options);
  } catch (...) {
    return start_error_exit();
  }

  BenchResult result;
  try {
    result = accelkit::run_bench(*rt, bench, show_progress);
  } catch (const BenchCheckError& e) {
    if (json) std::cout << bench_json(e.partial()) << '\n';
    else render_check(std::cout, e.partial());
    std::cout << std::flush;
    std::cerr << "accelkit: bench: " << e.what() << '\n';
    return kExitFailure;
  } catch (const DeviceUnavailableError& e) {  // compile = graph set explicitly, no graph capture here
    std::cerr << "accelkit: device unavailable: " << e.what() << '\n';
    return kExitUnavailable;
  } catch (const std::invalid_argument& e) {  // a model file that is not one, inputs it refuses
    std::cerr << "accelkit: " << e.what() << '\n';
    return kExitUsage;
  } catch (const BatchDoesNotFitError& e) {
    std::cerr << "accelkit: bench: --batch auto: " << e.what() << '\n';
    return kExitFailure;
  }
  if (json) std::cout << bench_json(result) << '\n';
  else render(std::cout, result);
  if (result.trace) render_trace(std::cerr, *result.trace, result.trace_steps);
  return kExitOk;
}

}  // namespace accelkit::cli
