// One rank of the data-parallel tests (distributed_test.cpp starts it, directly or through
// mpirun): trains a small MLP with the fused AdamW under accelkit::DataParallel on the global
// batch's shard for this rank in fp32 (precision = fp32; --master-weights: bf16 weights under
// the plan's autocast), and writes its final parameters (as fp32) to --out.
//
//   dist_worker --out FILE [--steps N] [--batch B] [--accumulate K] [--timeout S]
//               [--inf-at STEP --inf-rank R] [--die-at STEP --die-rank R] [--hang-at STEP]
//               [--wider-rank R]
//               [--master-weights 1] [--step-tuning 1]
//               [--device NAME --plugin-dir DIR] [--group-of-one 1] [--own-sigpipe 1]
//
// Every step's global batch comes from a generator seeded with the step number, the same in
// every process; each rank starts from different random weights (DataParallel must broadcast
// rank 0's). Prints "rank R of W threads T skipped K buckets N[ bf16 params]" on success. On a lost rank or
// a mismatched world: the error on stderr, exit 3. With --step-tuning (the plan's precision,
// step tuning on) a second line: "step tuning: decided | CHOSEN | SOURCE | WHY". Last, what
// SIGPIPE does after dist::init: "sigpipe ignored", "sigpipe default" or, with --own-sigpipe
// (a handler installed before init), "sigpipe own handler".
#include <signal.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include <torch/torch.h>

#include "accelkit/accelkit.hpp"

namespace {

void own_sigpipe(int) {}

const char* sigpipe_disposition() {
  struct sigaction now {};
  sigaction(SIGPIPE, nullptr, &now);
  if (now.sa_handler == SIG_IGN) return "ignored";
  if (now.sa_handler == SIG_DFL) return "default";
  return now.sa_handler == own_sigpipe ? "own handler" : "another handler";
}

int arg_int(int argc, char** argv, const std::string& name, int def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return std::atoi(argv[i + 1]);
  return def;
}

std::string arg_text(int argc, char** argv, const std::string& name) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return argv[i + 1];
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out = arg_text(argc, argv, "--out");
  const int steps = arg_int(argc, argv, "--steps", 20);
  const int batch = arg_int(argc, argv, "--batch", 32);
  const int accumulate = arg_int(argc, argv, "--accumulate", 1);
  const int timeout = arg_int(argc, argv, "--timeout", 30);
  const int inf_at = arg_int(argc, argv, "--inf-at", -1), inf_rank = arg_int(argc, argv, "--inf-rank", -1);
  const int die_at = arg_int(argc, argv, "--die-at", -1), die_rank = arg_int(argc, argv, "--die-rank", -1);
  const int hang_at = arg_int(argc, argv, "--hang-at", -1);  // that rank stops (SIGSTOP) there
  const int wider_rank = arg_int(argc, argv, "--wider-rank", -1);
  try {
    accelkit::ContextOptions o;
    o.settings.env = std::map<std::string, std::string>{};
    const bool master = !arg_text(argc, argv, "--master-weights").empty();
    const bool tuning = !arg_text(argc, argv, "--step-tuning").empty();
    const std::string device = arg_text(argc, argv, "--device"), plugin_dir = arg_text(argc, argv, "--plugin-dir");
    o.settings.cli = {{"device", device.empty() ? "cpu" : device}, {"dist_timeout", std::to_string(timeout)},
                      {"log_level", "error"},
                      {"step_tuning", tuning ? "true" : "false"}};
    // fp32 by default; with master weights the model trains in bf16 under autocast (asked for:
    // a CPU without native bf16 plans fp32 by itself, and emulates bf16 when asked); with step
    // tuning the plan's precision is one of the candidates.
    if (master) {
      o.settings.cli.emplace_back("precision", "bf16");
      o.settings.cli.emplace_back("master_weights", "on");
    }
    else if (!tuning) o.settings.cli.emplace_back("precision", "fp32");
    o.loader.cli_paths = {plugin_dir.empty() ? std::string(ACCELKIT_TEST_PLUGIN_DIR) : plugin_dir};
    o.loader.read_environment = false;
    o.loader.include_default_dirs = false;
    auto rt = accelkit::Runtime::start(o);
    accelkit::dist::Launch launch = accelkit::dist::detect_launch();
    launch.group_of_one = !arg_text(argc, argv, "--group-of-one").empty();
    if (!arg_text(argc, argv, "--own-sigpipe").empty()) std::signal(SIGPIPE, own_sigpipe);
    auto world = accelkit::dist::init(*rt, launch);
    const int rank = world->rank(), size = world->world_size();

    torch::manual_seed(static_cast<std::uint64_t>(11 + 100 * rank));  // different on purpose
    const int hidden = rank == wider_rank ? 65 : 64;
    torch::nn::Sequential net(torch::nn::Linear(32, hidden), torch::nn::Tanh(), torch::nn::Linear(hidden, 64),
                              torch::nn::Tanh(), torch::nn::Linear(64, 8));
    net->to(rt->device());
    accelkit::DataParallel dp(*rt, world, *net);
    std::vector<at::Tensor> params = net->parameters();
    accelkit::AdamWConfig adamw;
    adamw.lr = 1e-2;
    adamw.weight_decay = 0.01;
    accelkit::OptimizerChoice choice = rt->make_adamw(params, adamw);
    accelkit::LossScaler scaler(accelkit::LossScalerOptions{inf_at >= 0, 1024.0, 2.0, 0.5, 2000});
    dp.attach(scaler);

    const int shard = batch / size, micro = shard / accumulate;
    for (int step = 0; step < steps; ++step) {
      if (step == die_at && rank == die_rank) std::raise(SIGKILL);
      if (step == hang_at && rank == die_rank) std::raise(SIGSTOP);
      auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(1000 + step));
      at::Tensor x = at::randn({batch, 32}, gen), y = at::randn({batch, 8}, gen);
      x = x.narrow(0, rank * shard, shard).to(rt->device());
      y = y.narrow(0, rank * shard, shard).to(rt->device());
      accelkit::zero_grad(*choice.optimizer);
      for (int m = 0; m < accumulate; ++m) {
        at::Tensor loss;
        {
          auto autocast = rt->autocast();
          loss = torch::mse_loss(net->forward(x.narrow(0, m * micro, micro)).to(at::kFloat),
                                 y.narrow(0, m * micro, micro));
        }
        loss = scaler.scale(loss / accumulate);
        if (m + 1 < accumulate) {
          auto guard = dp.no_sync();
          dp.backward(loss);
        } else {
          dp.backward(loss);
        }
      }
      if (step == inf_at && rank == inf_rank) {
        at::NoGradGuard g;
        params[0].grad().view({-1})[0] = std::numeric_limits<float>::infinity();
      }
      scaler.step(*choice.optimizer);
    }
    at::Tensor flat = at::cat([&] {
      std::vector<at::Tensor> f;
      for (auto& p : params) f.push_back(p.detach().reshape({-1}).to(at::kFloat).to(at::kCPU).contiguous());
      return f;
    }());
    std::ofstream(out, std::ios::binary)
        .write(static_cast<const char*>(flat.data_ptr()), static_cast<std::streamsize>(flat.numel() * 4));
    std::printf("rank %d of %d threads %d skipped %lld buckets %zu%s\n", rank, size, at::get_num_threads(),
                static_cast<long long>(scaler.skipped_steps()), dp.buckets(),
                choice.master_weights ? " bf16 params" : "");
    std::printf("backend %s: %s\n", world->backend().c_str(), world->why().c_str());
    std::printf("launcher %s%s\n", world->launch().launcher.c_str(),
                world->launch().store_hosted ? ", its store hosted by the launcher" : "");
    if (const auto& a = rt->adamw_choice(); a && a->origin != "only") std::printf("adamw %s: %s\n", a->name.c_str(), a->why.c_str());
    if (const char* made = std::getenv("ACCELKIT_FIXTURE_GROUP_MADE")) std::printf("fixture group %s\n", made);
    if (tuning) {
      const accelkit::StepTuningStatus& st = rt->step_tuning();
      std::printf("step tuning: %s | %s | %s | %s\n",
                  st.state == accelkit::StepTuningStatus::State::decided ? "decided" : "not decided",
                  st.candidates.empty() ? "" : st.candidates[st.chosen].label().c_str(), st.source.c_str(),
                  st.why.c_str());
    }
    std::printf("sigpipe %s\n", sigpipe_disposition());
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(3);  // the process group's threads may still wait on the lost rank
  }
}
