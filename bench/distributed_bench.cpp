// accelkit_bench_distributed [--ranks N] [--rounds R] [--warmup W] [--width D] [--batch B]
//                            [--device D] [--threads T]:
// data-parallel communication through accelkit::DataParallel against c10d's plain all-reduce,
// N local ranks over the device's collective backend (Gloo on loopback on a CPU; NCCL through
// the CUDA plugin on a GPU); the program starts its own ranks with dist::run_local_workers
// unless a launcher's variables are set; --threads sets each rank's intra-op threads (default:
// the host's cores shared out, which leaves Gloo's own threads none to spare). --ranks 1 makes the process group all the same
// (Launch::group_of_one): the collective path on one device. Rank 0 prints, per round
// medians:
//
// - bus bandwidth: a plain ProcessGroupGloo all-reduce of one fp32 tensor as large as the
//   model's gradients, and the same bytes through the wrapper's buckets (a backward whose
//   compute is negligible: the gradient of sum(p) * c; the wrapper's time less the same
//   backward under no_sync). busbw = 2 (N-1) / N x bytes / time, as NCCL's tests define it
//   (one rank moves nothing between devices: bytes / time there).
// - overlap, on the bench's mlp (3 x Linear(D) + ReLU, MSE, global batch B): compute alone
//   (forward + backward under no_sync), communication alone (the plain all-reduce above) and
//   the synchronised step; hidden = (compute + communication - step) / communication (none, and
//   the step's excess said, where the step is longer than the two alone).
//
// Every variant runs once per round, in a fixed rotation; medians over the rounds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "accelkit/accelkit.hpp"
#include "accelkit/device_sync.hpp"
#include "bench_timing.hpp"

namespace {

int arg_int(int argc, char** argv, const std::string& name, int def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return std::atoi(argv[i + 1]);
  return def;
}

using accelkit::bench_timing::Clock;
using accelkit::bench_timing::median;
using accelkit::bench_timing::ms_since;

}  // namespace

// What one run measured, and what rank 0 prints of it.
struct RunFacts {
  int n;
  std::string backend, device, why;
  int width;
  std::size_t buckets;
  long long bucket_mib;
  int batch;
  long long shard;
  double bytes;
};
struct Timings {
  std::vector<double> plain, bucket_sync, bucket_local, step_sync, step_local;
};

void print_figures(const RunFacts& r, const Timings& t) {
  // One rank moves nothing between devices: its figure is bytes / time (NCCL's algbw).
  const double factor = r.n > 1 ? 2.0 * (r.n - 1) / r.n : 1.0;
  const char* bw = r.n > 1 ? "bus bandwidth" : "algorithm bandwidth (one rank)";
  const double p = median(t.plain), bs = median(t.bucket_sync), bl = median(t.bucket_local);
  const double comm_buckets = bs - bl;
  const double ss = median(t.step_sync), sl = median(t.step_local);
  const double plain_bw = factor * r.bytes / (p * 1e-3) / 1e9;
  const double bucket_bw = comm_buckets > 0 ? factor * r.bytes / (comm_buckets * 1e-3) / 1e9 : 0;
  const double hidden = (sl + p - ss) / p;
  std::printf("ranks %d, threads per rank %d, %s on %s (%s), LibTorch %s\n", r.n, at::get_num_threads(),
              r.backend.c_str(), r.device.c_str(), r.why.c_str(), TORCH_VERSION);
  std::printf("gradients: %.1f MB fp32 (3 x Linear(%d)), %zu buckets of <= %lld MiB\n", r.bytes / 1e6, r.width,
              r.buckets, r.bucket_mib);
  std::printf("plain all-reduce: %.2f ms, %s %.2f GB/s\n", p, bw, plain_bw);
  std::printf("through the buckets: %.2f ms (backward %.2f ms synchronised - %.2f ms local), %s "
              "%.2f GB/s = %.0f%% of plain\n",
              comm_buckets, bs, bl, bw, bucket_bw, 100.0 * bucket_bw / plain_bw);
  std::printf("mlp step, batch %d (%lld per rank): compute alone %.2f ms, communication alone %.2f ms, "
              "synchronised step %.2f ms: ",
              r.batch, r.shard, sl, p, ss);
  // A step longer than its compute and communication together hides nothing: the rest is the
  // buckets' own work (copies into and out of the flat buffers), said as such, not as a
  // negative share.
  if (hidden >= 0) std::printf("%.0f%% of the communication hidden behind backward\n", 100.0 * hidden);
  else std::printf("none hidden; the step takes %.2f ms more than the two alone (the buckets' own copies)\n", -hidden * p);
  char hidden_json[32];
  if (hidden >= 0) std::snprintf(hidden_json, sizeof hidden_json, "%.4f", hidden);
  else std::snprintf(hidden_json, sizeof hidden_json, "null");
  std::printf("{\"ranks\": %d, \"backend\": \"%s\", \"device\": \"%s\", \"bytes\": %.0f, \"plain_ms\": %.4f, \"plain_busbw_gbs\": %.4f, "
              "\"bucket_ms\": %.4f, \"bucket_busbw_gbs\": %.4f, \"bucket_vs_plain\": %.4f, "
              "\"compute_ms\": %.4f, \"step_ms\": %.4f, \"hidden_fraction\": %s, \"step_over_parts_ms\": %.4f}\n",
              r.n, r.backend.c_str(), r.device.c_str(), r.bytes, p, plain_bw, comm_buckets, bucket_bw, bucket_bw / plain_bw, sl, ss,
              hidden_json, ss - sl - p);
}

int main(int argc, char** argv) {
  const int ranks = arg_int(argc, argv, "--ranks", 2);
  if (!std::getenv("RANK")) {  // start the ranks
    std::vector<std::string> args{std::filesystem::read_symlink("/proc/self/exe").string()};
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    return accelkit::dist::run_local_workers(args, ranks, [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); });
  }
  const int rounds = arg_int(argc, argv, "--rounds", 20), warmup = arg_int(argc, argv, "--warmup", 3);
  const int width = arg_int(argc, argv, "--width", 2048), batch = arg_int(argc, argv, "--batch", 256);
  try {
    accelkit::ContextOptions o;
    o.settings.cli = {{"precision", "fp32"}, {"log_level", "error"}};
    for (int i = 1; i + 1 < argc; ++i) {
      if (std::string(argv[i]) == "--device") o.settings.cli.emplace_back("device", argv[i + 1]);
      if (std::string(argv[i]) == "--threads") o.settings.cli.emplace_back("threads", argv[i + 1]);
    }
    auto rt = accelkit::Runtime::start(o);
    accelkit::dist::Launch launch = accelkit::dist::detect_launch();
    launch.group_of_one = ranks == 1;
    auto world = accelkit::dist::init(*rt, launch);
    const int n = world->world_size(), rank = world->rank();
    const c10::Device device = rt->device();
    auto sync = [&] { accelkit::detail::synchronize(device); };

    torch::manual_seed(1);
    torch::nn::Sequential mlp;
    for (int i = 0; i < 3; ++i) {
      mlp->push_back(torch::nn::Linear(width, width));
      mlp->push_back(torch::nn::ReLU());
    }
    mlp->to(device);
    accelkit::DataParallel dp(*rt, world, *mlp);
    std::vector<at::Tensor> params = mlp->parameters();
    std::int64_t numel = 0;
    for (auto& p : params) numel += p.numel();
    const double bytes = static_cast<double>(numel) * 4;
    const std::int64_t shard = batch / n;
    const auto on = at::TensorOptions().device(device);
    at::Tensor x = at::randn({shard, width}, on), y = at::randn({shard, width}, on);
    at::Tensor flat = at::randn({numel}, at::TensorOptions().device(world->tensor_device()));

    auto zero = [&] {
      for (auto& p : params) p.mutable_grad() = at::Tensor();
    };
    auto cheap_loss = [&] {
      at::Tensor l = at::zeros({}, on);
      for (auto& p : params) l = l + p.sum();
      return l * 1e-3;
    };
    std::vector<double> plain, bucket_sync, bucket_local, step_sync, step_local;
    for (int r = 0; r < warmup + rounds; ++r) {
      const bool keep = r >= warmup;
      auto t = Clock::now();
      std::vector<at::Tensor> one{flat};
      world->all_reduce_sum(one);
      sync();
      if (keep) plain.push_back(ms_since(t));

      zero();
      at::Tensor l1 = cheap_loss();
      sync();
      t = Clock::now();
      dp.backward(l1);
      sync();
      if (keep) bucket_sync.push_back(ms_since(t));
      zero();
      at::Tensor l2 = cheap_loss();
      sync();
      t = Clock::now();
      {
        auto local = dp.no_sync();
        dp.backward(l2);
      }
      sync();
      if (keep) bucket_local.push_back(ms_since(t));

      zero();
      sync();
      t = Clock::now();
      dp.backward(torch::mse_loss(mlp->forward(x), y));
      sync();
      if (keep) step_sync.push_back(ms_since(t));
      zero();
      sync();
      t = Clock::now();
      {
        auto local = dp.no_sync();
        dp.backward(torch::mse_loss(mlp->forward(x), y));
      }
      sync();
      if (keep) step_local.push_back(ms_since(t));
      world->barrier();
    }
    if (rank == 0)
      print_figures({n, world->backend(), device.str(), world->why(), width, dp.buckets(),
                     static_cast<long long>(dp.bucket_bytes() >> 20), batch, static_cast<long long>(shard), bytes},
                    {plain, bucket_sync, bucket_local, step_sync, step_local});
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accelkit_bench_distributed: %s\n", e.what());
    std::_Exit(1);
  }
}
