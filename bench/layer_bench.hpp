// What the layer-by-layer benches of the CPU plugin's kernels share (accelkit_bench_narrow_conv,
// accelkit_bench_batch_norm, accelkit_bench_max_pool, accelkit_bench_dropout): their command
// line, LibTorch's side of the comparison - the runtime's own plan without the plugin's kernels -
// and the rounds that alternate the two.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accelkit/runtime.hpp"
#include "bench_timing.hpp"

namespace accelkit::bench_layers {

struct Args {
  int rounds = 30;
  bool channels_last = false;
};

// `[--rounds R] [--channels-last]`; nullopt after saying what is wrong (exit with 2).
inline std::optional<Args> parse_args(int argc, char** argv, const char* program) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--rounds" && i + 1 < argc) {
      a.rounds = std::atoi(argv[++i]);
    } else if (s == "--channels-last") {
      a.channels_last = true;
    } else {
      std::fprintf(stderr, "usage: %s [--rounds R] [--channels-last]\n", program);
      return std::nullopt;
    }
  }
  if (a.rounds < 3) {
    std::fprintf(stderr, "%s: --rounds must be at least 3\n", program);
    return std::nullopt;
  }
  return a;
}

// The plan without the plugin's kernels, where the runtime's plan lists the plugin's `op`;
// nullopt after saying why not (exit with 1).
inline std::optional<PrecisionPlan> libtorch_plan(const Runtime& rt, const std::string& op, const char* program) {
  bool listed = false;
  for (const auto& k : rt.precision().kernels) listed = listed || k == op;
  if (!listed) {
    std::fprintf(stderr, "%s: the plan on %s lists no plugin %s (%s)\n", program, rt.device().str().c_str(),
                 op.c_str(), rt.precision().kernels.empty() ? "no plugin kernels" : "not this one");
    return std::nullopt;
  }
  PrecisionPlan plan = rt.precision();
  plan.kernels.clear();
  return plan;
}

// A layer bench's runtime, the plan without the plugin's kernels, and the plan's threads.
struct Session {
  std::unique_ptr<Runtime> rt;
  PrecisionPlan libtorch;
  int threads = 0;

  // The next calls with the plugin's kernels (the runtime's plan) or LibTorch's, at the plan's threads.
  void use(bool plugin) const {
    rt->apply_precision(plugin ? rt->precision() : libtorch);
    at::set_num_threads(threads);
  }
};

// The runtime started, where its plan lists the plugin's `op`; nullopt after saying why not.
inline std::optional<Session> start(const std::string& op, const char* program) {
  Session s;
  s.rt = Runtime::start({});
  auto plan = libtorch_plan(*s.rt, op, program);
  if (!plan) return std::nullopt;
  s.libtorch = *plan;
  s.threads = at::get_num_threads();
  return s;
}

// Medians of a forward and its backward with the plugin's kernels and with LibTorch's, and of a
// copy of the layer's input (what one pass over it costs).
struct Times {
  double plugin_fwd = 0, libtorch_fwd = 0, plugin_bwd = 0, libtorch_bwd = 0, copy = 0;
};

// `fwd()` then `bwd(its result)`, the plugin's kernels and LibTorch's alternating call by call
// (which goes first swaps every round), three warm-up rounds, then `rounds` timed; after the
// warm-up, `check(plugin's forward, its backward, LibTorch's forward, its backward)` once.
template <class Fwd, class Bwd, class Check>
Times alternate(const Session& s, int rounds, const at::Tensor& input, Fwd&& fwd, Bwd&& bwd, Check&& check) {
  using bench_timing::Clock;
  using bench_timing::ms_since;
  std::array<std::vector<double>, 5> t;  // plugin fwd, LibTorch fwd, plugin bwd, LibTorch bwd, copy
  for (int r = -3; r < rounds; ++r) {
    for (int v = 0; v < 2; ++v) {
      const bool plugin = (v == 0) == (r % 2 == 0);
      s.use(plugin);
      auto t0 = Clock::now();
      const auto out = fwd();
      const double f = ms_since(t0);
      t0 = Clock::now();
      const auto grads = bwd(out);
      const double b = ms_since(t0);
      if (r >= 0) {
        t[plugin ? 0 : 1].push_back(f);
        t[plugin ? 2 : 3].push_back(b);
      }
      if (r == -1 && plugin) {
        s.use(false);
        const auto lib = fwd();
        check(out, grads, lib, bwd(lib));
      }
    }
    const auto t0 = Clock::now();
    const at::Tensor copy = input.clone();
    if (r >= 0) t[4].push_back(ms_since(t0));
  }
  using bench_timing::median;
  return {median(t[0]), median(t[1]), median(t[2]), median(t[3]), median(t[4])};
}

}  // namespace accelkit::bench_layers
