// accelkit_bench_optimizer: one AdamW step on ~16.8M parameters (16 MLP-like weight matrices
// plus biases), torch::optim::AdamW at LibTorch's default threads vs accelkit's FusedAdamW at
// one thread per physical core, alternating blocks, after warm-up; median/min/max per step.
// Also measures copy bandwidth over buffers larger than L3 (bytes read + written) and prints
// the floor: bytes an AdamW step must move / that bandwidth.
//
// A second, stricter floor uses the bandwidth of an in-place update (x *= 1: read + write the
// same lines, no read-for-ownership), which is AdamW's own access pattern.
// --tuned adds torch::optim::AdamW at the fused thread count.
//
//   accelkit_bench_optimizer [--steps N] [--rounds R] [--threads T] [--dtype float|bf16]
//                            [--isa scalar|avx2|avx512] [--copy-mb M] [--tuned] [--layers L]
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fused_adamw.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int steps = 40;     // timed steps per optimizer, over all rounds
  int rounds = 8;     // alternating blocks
  int threads = 0;    // fused threads; 0: physical cores
  bool bf16 = false;  // bf16 params and grads (float state)
  std::string isa;    // force a fused path
  int64_t copy_mb = 512;
  bool tuned = false;  // also torch AdamW at the fused thread count
  int layers = 16;     // weight matrices of 1M params (+ 1K bias each)
};

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr,
               "%s\nusage: accelkit_bench_optimizer [--steps N] [--rounds R] [--threads T] "
               "[--dtype float|bf16] [--isa scalar|avx2|avx512] [--copy-mb M] [--tuned] [--layers L]\n",
               msg);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + k).c_str());
      return argv[++i];
    };
    if (k == "--steps") a.steps = std::stoi(value());
    else if (k == "--rounds") a.rounds = std::stoi(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--isa") a.isa = value();
    else if (k == "--copy-mb") a.copy_mb = std::stoll(value());
    else if (k == "--tuned") a.tuned = true;
    else if (k == "--layers") a.layers = std::stoi(value());
    else if (k == "--dtype") {
      const auto v = value();
      if (v != "float" && v != "bf16") usage("--dtype: float or bf16");
      a.bf16 = v == "bf16";
    } else if (k == "-h" || k == "--help") usage("");
    else usage(("unknown option " + k).c_str());
  }
  if (a.steps < 1 || a.rounds < 1 || a.rounds > a.steps || a.copy_mb < 1 || a.layers < 1) usage("bad numbers");
  return a;
}

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// Distinct (package, core) pairs among CPUs 0..N-1; hardware_concurrency if sysfs says nothing.
int physical_cores() {
  std::set<std::pair<std::string, std::string>> cores;
  for (int cpu = 0;; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    const auto core = read_line(dir + "core_id");
    if (core.empty()) break;
    cores.insert({read_line(dir + "physical_package_id"), core});
  }
  return cores.empty() ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))
                       : static_cast<int>(cores.size());
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Stats {
  double median, min, max;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {med, v.front(), v.back()};
}

// Best of `reps` runs of fn moving `bytes`, in GB/s.
double best_gbps(int reps, double bytes, const std::function<void()>& fn) {
  fn();  // touch
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    best = std::max(best, bytes / (ms_since(t0) * 1e-3) / 1e9);
  }
  return best;
}

struct Bandwidth {
  double memcpy_1t, memcpy_nt, aten_copy;  // copies: read src + write dst
  double in_place;                         // x *= 1: read + write the same lines
  double best_copy() const { return std::max({memcpy_1t, memcpy_nt, aten_copy}); }
};

// Copy bandwidth counting bytes read + written (2 x buffer), buffers well beyond L3.
Bandwidth copy_bandwidth(int64_t mb, int threads) {
  const int64_t n = mb * (1 << 20) / 4;
  auto src = at::rand({n});
  auto dst = at::zeros({n});
  const double bytes = 2.0 * static_cast<double>(n) * 4;
  Bandwidth bw{};
  char* d = static_cast<char*>(dst.data_ptr());
  const char* s = static_cast<const char*>(src.data_ptr());
  const size_t total = static_cast<size_t>(n) * 4;
  bw.memcpy_1t = best_gbps(5, bytes, [&] { std::memcpy(d, s, total); });
  bw.memcpy_nt = best_gbps(5, bytes, [&] {
    std::vector<std::thread> pool;
    const size_t part = (total / threads + 63) / 64 * 64;
    for (int t = 0; t < threads; ++t) {
      const size_t off = std::min(total, part * t), len = std::min(part, total - off);
      pool.emplace_back([=] { std::memcpy(d + off, s + off, len); });
    }
    for (auto& th : pool) th.join();
  });
  at::set_num_threads(threads);
  bw.aten_copy = best_gbps(5, bytes, [&] { dst.copy_(src); });
  bw.in_place = best_gbps(5, bytes, [&] { src.mul_(1.0); });
  return bw;
}

// MLP-like weights [1024, 1024] and their biases: 16 layers = 16,793,600 params.
std::vector<torch::Tensor> make_params(int layers, bool bf16) {
  std::vector<torch::Tensor> ps;
  for (int i = 0; i < layers; ++i) {
    ps.push_back(at::randn({1024, 1024}) * 0.02);
    ps.push_back(at::zeros({1024}));
  }
  for (auto& p : ps) {
    if (bf16) p = p.to(at::kBFloat16);
    p.mutable_grad() = at::randn(p.sizes(), p.options());
  }
  return ps;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  torch::NoGradGuard no_grad;
  const int default_threads = at::get_num_threads();
  const int cores = physical_cores();
  const int fused_threads = args.threads > 0 ? args.threads : cores;

  auto base_params = make_params(args.layers, args.bf16);
  auto fused_params = make_params(args.layers, args.bf16);
  int64_t numel = 0;
  for (const auto& p : base_params) numel += p.numel();
  // Per param: read p, g, m, v; write p, m, v. State is float; p and g are float or bf16.
  const double bytes_per_param = args.bf16 ? 2 + 2 + 4 + 4 + 2 + 4 + 4 : 7 * 4;
  const double bytes = bytes_per_param * static_cast<double>(numel);

  torch::optim::AdamW baseline(base_params, torch::optim::AdamWOptions(1e-3));
  accelkit::cpu::FusedAdamW fused(fused_params, torch::optim::AdamWOptions(1e-3));
  if (!args.isa.empty()) {
    bool found = false;
    for (auto isa : {accelkit::cpu::AdamWIsa::scalar, accelkit::cpu::AdamWIsa::avx2,
                     accelkit::cpu::AdamWIsa::avx512})
      if (args.isa == accelkit::cpu::adamw_isa_name(isa)) {
        fused.set_isa(isa);
        found = true;
      }
    if (!found) usage("--isa: scalar, avx2 or avx512");
  }

  std::printf("machine:   %s, %d physical cores, %u logical CPUs\n", cpu_model().c_str(), cores,
              std::thread::hardware_concurrency());
  std::printf("params:    %zu tensors, %lld %s params; %.1f B/param, %.1f MB moved per step\n",
              base_params.size(), static_cast<long long>(numel), args.bf16 ? "bf16 (float state)" : "fp32",
              bytes_per_param, bytes / 1e6);

  struct Row {
    std::string name;
    torch::optim::Optimizer* opt;
    int threads;
    std::vector<double> ms;
  };
  std::vector<torch::Tensor> tuned_params;
  std::unique_ptr<torch::optim::AdamW> tuned;
  std::vector<Row> rows = {{"torch::optim::AdamW", &baseline, default_threads, {}},
                           {"", &fused, fused_threads, {}}};
  if (args.tuned) {
    tuned_params = make_params(args.layers, args.bf16);
    tuned = std::make_unique<torch::optim::AdamW>(tuned_params, torch::optim::AdamWOptions(1e-3));
    rows.push_back({"torch::optim::AdamW", tuned.get(), fused_threads, {}});
  }

  // Alternating blocks: one untimed step after each thread switch, then timed steps.
  auto block = [](Row& row, int n, bool keep) {
    at::set_num_threads(row.threads);
    row.opt->step();
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      row.opt->step();
      if (keep) row.ms.push_back(ms_since(t0));
    }
  };
  for (auto& row : rows) block(row, 1, false);  // warm-up: state, page faults, thread pools
  for (int r = 0; r < args.rounds; ++r)
    for (auto& row : rows) block(row, args.steps / args.rounds + (r < args.steps % args.rounds ? 1 : 0), true);
  at::set_num_threads(fused_threads);
  rows[1].name = fused.implementation();

  const Bandwidth bw = copy_bandwidth(args.copy_mb, fused_threads);
  const double floor_ms = bytes / (bw.best_copy() * 1e9) * 1e3;
  const double strict_floor_ms = bytes / (bw.in_place * 1e9) * 1e3;

  std::printf("bandwidth (bytes read + written, %lld MB buffers): memcpy 1 thread %.1f GB/s, memcpy %d threads "
              "%.1f GB/s, at::copy_ %d threads %.1f GB/s; in-place x *= 1, %d threads %.1f GB/s\n",
              static_cast<long long>(args.copy_mb), bw.memcpy_1t, fused_threads, bw.memcpy_nt, fused_threads,
              bw.aten_copy, fused_threads, bw.in_place);
  std::printf("steps:     %d timed per optimizer in %d alternating rounds, after warm-up\n\n", args.steps,
              args.rounds);
  std::printf("| optimizer | threads | median ms | min ms | max ms | GB/s at median |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const auto& row : rows) {
    const Stats st = stats(row.ms);
    std::printf("| %s | %d | %.2f | %.2f | %.2f | %.1f |\n", row.name.c_str(), row.threads, st.median, st.min,
                st.max, bytes / st.median / 1e6);
  }
  const double base_ms = stats(rows[0].ms).median, fused_ms = stats(rows[1].ms).median;
  std::printf("\nspeedup (median): %.2fx over torch::optim::AdamW at %d thread(s)", base_ms / fused_ms,
              default_threads);
  if (args.tuned) std::printf(", %.2fx at %d", stats(rows[2].ms).median / fused_ms, fused_threads);
  std::printf("\nbandwidth floor:  %.1f MB / %.1f GB/s (best copy) = %.2f ms; floor / fused median = %.2f\n",
              bytes / 1e6, bw.best_copy(), floor_ms, floor_ms / fused_ms);
  std::printf("strict floor:     %.1f MB / %.1f GB/s (in-place) = %.2f ms; floor / fused median = %.2f\n",
              bytes / 1e6, bw.in_place, strict_floor_ms, strict_floor_ms / fused_ms);
  return 0;
}
