// What the layer-by-layer benches of the CPU plugin's kernels share (accelkit_bench_narrow_conv,
// accelkit_bench_batch_norm, accelkit_bench_max_pool): their command line, and LibTorch's side of the comparison - the
// runtime's own plan without the plugin's kernels.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "accelkit/runtime.hpp"

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

}  // namespace accelkit::bench_layers
