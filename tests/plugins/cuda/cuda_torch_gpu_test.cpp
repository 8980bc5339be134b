// GPU tests of the LibTorch-CUDA glue (built only where LibTorch has CUDA): FusedAdamWCuda
// against torch::optim::AdamW on fresh random data, whole-step graph capture against eager
// (GraphedStep, and the SDK's CapturedStep over it), the eager fallback, bf16 autocast
// numerics, and NVML against nvidia-smi. Skipped without a GPU.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "torch_doctest.hpp"

#include <cstdio>
#include <optional>
#include <sstream>
#include <utility>
#include <string>

#include <accelkit/prefetch.hpp>
#include <accelkit/sdk/torch_compat.hpp>

#include "cuda_captured_step.hpp"
#include "cuda_optimizer.hpp"
#include "cuda_probe.hpp"
#include "fused_adamw_cuda.hpp"
#include "graph_step.hpp"
#include "nvml_monitor.hpp"
#include "sgd_parity.hpp"
#include "test_support.hpp"

using namespace accelkit;
using namespace accelkit::cuda;

namespace {

bool gpu() {
  static const bool ok = [] {
    const bool has = torch::cuda::is_available();
    if (!has) std::printf("skipped: no GPU\n");
    return has;
  }();
  return ok;
}

std::vector<torch::Tensor> random_params(torch::Dtype dtype, unsigned seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> out;
  for (int64_t n : {1, 7, 4097, 65537, 1 << 20})
    out.push_back(torch::randn({n}, torch::dtype(dtype).device(torch::kCUDA)));
  out.push_back(torch::randn({64, 33}, torch::dtype(dtype).device(torch::kCUDA)).t());  // non-contiguous
  return out;
}

}  // namespace

TEST_CASE("fused AdamW matches torch::optim::AdamW over 100 steps" * doctest::skip(!gpu())) {
  for (bool amsgrad : {false, true}) {
    auto a = random_params(torch::kFloat, 1);
    std::vector<torch::Tensor> b;
    for (auto& p : a) b.push_back(p.detach().clone());
    auto options = torch::optim::AdamWOptions(1e-3).weight_decay(1e-2).amsgrad(amsgrad);
    FusedAdamWCuda fused(a, options);
    torch::optim::AdamW plain(b, options);
    for (int step = 0; step < 100; ++step) {
      for (std::size_t i = 0; i < a.size(); ++i) {
        auto g = torch::randn_like(a[i]);
        a[i].mutable_grad() = g;
        b[i].mutable_grad() = g.clone();
      }
      fused.step();
      plain.step();
    }
    // Same float formula; LibTorch's ops may differ by an ulp per step: 1e-5 relative after 100.
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(torch::allclose(a[i], b[i], 1e-5, 1e-6));
  }
}

TEST_CASE("fused SGD (at::_fused_sgd_ through the plugin) matches torch::optim::SGD over 50 steps" *
          doctest::skip(!gpu())) {
  CudaOptimizer plugin(0);
  auto make = [&plugin](std::vector<at::Tensor> p, torch::optim::SGDOptions o) {
    SGDConfig c;
    c.lr = o.lr();
    c.momentum = o.momentum();
    c.dampening = o.dampening();
    c.weight_decay = o.weight_decay();
    c.nesterov = o.nesterov();
    auto made = plugin.create_sgd(p, c);
    REQUIRE_MESSAGE(made.ok(), made.status().message());
    auto opt = made.value();
    // The plugin made it with one group; the parity run cuts the lr on that group's options.
    return opt;
  };
  if (!compat::aten_fused_sgd_available(c10::DeviceType::CUDA)) {
    auto made = plugin.create_sgd({}, SGDConfig{});
    CHECK(!made.ok());
    MESSAGE("skipped: " << made.status().message());
    return;
  }
  const auto seed = test::test_seed();
  CAPTURE(seed);
  for (const auto& c : test::sgd_cases()) {
    const std::string name = c.name;
    CAPTURE(name);
    const auto r = test::sgd_parity(c, torch::kCUDA, seed, 50, make);
    // Bitwise or within 1e-6 relative, as the issue asks; the kernel rounds as LibTorch's ops do.
    CHECK(r.after_steps <= 1e-6);
    CHECK(r.fused_to_torch <= 1e-6);
    CHECK(r.torch_to_fused <= 1e-6);
    std::printf("fused SGD on cuda, %s: %.3g after 50 steps, %.3g / %.3g after the checkpoints\n", c.name,
                r.after_steps, r.fused_to_torch, r.torch_to_fused);
  }
}

TEST_CASE("bf16 params keep fp32 state and track an fp32 run" * doctest::skip(!gpu())) {
  auto p32 = random_params(torch::kFloat, 2);
  std::vector<torch::Tensor> p16;
  for (auto& p : p32) p16.push_back(p.detach().to(torch::kBFloat16));
  FusedAdamWCuda a(p32), b(p16);
  for (int step = 0; step < 20; ++step) {
    for (std::size_t i = 0; i < p32.size(); ++i) {
      auto g = torch::randn_like(p32[i]) * 0.1;
      p32[i].mutable_grad() = g;
      p16[i].mutable_grad() = g.to(torch::kBFloat16);
    }
    a.step();
    b.step();
  }
  for (std::size_t i = 0; i < p32.size(); ++i) CHECK(torch::allclose(p16[i].to(torch::kFloat), p32[i], 2e-2, 2e-2));
}

// Master weights: matrices become bf16, vectors stay fp32; the master follows
// torch::optim::AdamW on fp32 weights fed the same bf16 grads (1e-5 relative after 50 steps,
// the fp32 bound), every bf16 param is exactly its master's rounding, and the masters survive
// a checkpoint into a fresh optimizer.
TEST_CASE("master weights: the fp32 master follows torch::optim::AdamW; params are its bf16 rounding" *
          doctest::skip(!gpu())) {
  for (bool amsgrad : {false, true}) {
    torch::manual_seed(11);
    std::vector<torch::Tensor> model{torch::randn({256, 384}, torch::kCUDA), torch::randn({384}, torch::kCUDA),
                                     torch::randn({1 << 20, 5}, torch::kCUDA),
                                     torch::randn({64, 33}, torch::kCUDA).t()};
    std::vector<torch::Tensor> ref;
    for (auto& p : model) ref.push_back(p.detach().clone());
    auto options = torch::optim::AdamWOptions(1e-2).weight_decay(0.1).amsgrad(amsgrad);
    FusedAdamWCuda fused(model, options, false, /*master_weights=*/true);
    torch::optim::AdamW plain(ref, options);
    CHECK(fused.implementation().find("bf16 weights + fp32 master") != std::string::npos);
    for (std::size_t i = 0; i < model.size(); ++i) {
      const bool matrix_bf16_vector_fp32 =
          model[i].scalar_type() == (model[i].dim() >= 2 ? torch::kBFloat16 : torch::kFloat);
      CHECK(matrix_bf16_vector_fp32);
    }
    for (int step = 0; step < 50; ++step) {
      for (std::size_t i = 0; i < model.size(); ++i) {
        auto g = torch::randn(model[i].sizes(), torch::kCUDA).to(model[i].scalar_type());
        model[i].mutable_grad() = g;
        ref[i].mutable_grad() = g.to(torch::kFloat);
      }
      fused.step();
      plain.step();
    }
    for (std::size_t i = 0; i < model.size(); ++i) {
      const auto m = fused.master_of(model[i]);
      if (model[i].dim() < 2) {
        CHECK_FALSE(m.defined());
        CHECK(torch::allclose(model[i], ref[i], 1e-5, 1e-6));
        continue;
      }
      REQUIRE(m.defined());
      CHECK(torch::allclose(m, ref[i], 1e-5, 1e-6));
      CHECK(torch::equal(model[i], m.to(torch::kBFloat16)));
    }
    // The masters travel with the checkpoint: a fresh optimizer over the bf16 params loads them.
    torch::serialize::OutputArchive out;
    fused.save(out);
    std::ostringstream bytes;
    out.save_to(bytes);
    FusedAdamWCuda loaded(model, options, false, /*master_weights=*/true);
    torch::serialize::InputArchive in;
    std::istringstream read(bytes.str());
    in.load_from(read);
    loaded.load(in);
    for (auto& p : model)
      if (p.dim() >= 2) CHECK(torch::equal(loaded.master_of(p), fused.master_of(p)));
  }
}

namespace {

struct Net {
  torch::nn::Sequential model{torch::nn::Linear(64, 256), torch::nn::ReLU(), torch::nn::Linear(256, 64)};
  torch::Tensor x, y;  // static inputs
};

Net make_net(unsigned seed) {
  torch::manual_seed(seed);
  Net n;
  n.model->to(torch::kCUDA);
  n.x = torch::zeros({32, 64}, torch::kCUDA);
  n.y = torch::zeros({32, 64}, torch::kCUDA);
  return n;
}

}  // namespace

TEST_CASE("graph capture: same parameters as eager after 30 steps" * doctest::skip(!gpu())) {
  Net eager = make_net(3), graphed = make_net(3);
  FusedAdamWCuda opt_e(eager.model->parameters()), opt_g(graphed.model->parameters());
  opt_e.set_capturable(true);  // the same arithmetic on both sides
  auto step_of = [](Net& n, torch::optim::Optimizer& opt) {
    return [&n, &opt] {
      opt.zero_grad();
      torch::mse_loss(n.model->forward(n.x), n.y).backward();
      opt.step();
    };
  };
  GraphedStep g(opt_g, step_of(graphed, opt_g));
  auto eager_step = step_of(eager, opt_e);
  torch::manual_seed(4);
  for (int i = 0; i < 30; ++i) {
    auto x = torch::randn({32, 64}, torch::kCUDA), y = torch::randn({32, 64}, torch::kCUDA);
    eager.x.copy_(x);
    eager.y.copy_(y);
    graphed.x.copy_(x);
    graphed.y.copy_(y);
    eager_step();
    g.run();
  }
  torch::cuda::synchronize();
  CHECK(g.captured());
  CHECK(g.fallback_reason().empty());
  CHECK(g.replays() > 20);
  auto pe = eager.model->parameters(), pg = graphed.model->parameters();
  for (std::size_t i = 0; i < pe.size(); ++i) CHECK(torch::allclose(pe[i], pg[i], 1e-5, 1e-6));
}

TEST_CASE("graph capture falls back to eager with a reason and still trains" * doctest::skip(!gpu())) {
  Net n = make_net(5);
  FusedAdamWCuda opt(n.model->parameters());
  int host_syncs = 0;
  GraphedStep g(opt, [&] {
    opt.zero_grad();
    auto loss = torch::mse_loss(n.model->forward(n.x), n.y);
    host_syncs += loss.item<float>() >= 0;  // a host sync: not capturable
    loss.backward();
    opt.step();
  });
  n.x.normal_();
  n.y.normal_();
  const auto before = n.model->parameters()[0].clone();
  for (int i = 0; i < 6; ++i) g.run();
  CHECK_FALSE(g.captured());
  CHECK(g.fell_back());
  MESSAGE(g.fallback_reason());
  CHECK(g.fallback_reason().find("graph capture failed") == 0);
  CHECK(host_syncs >= 6);
  CHECK_FALSE(torch::equal(before, n.model->parameters()[0]));

  torch::optim::SGD sgd(n.model->parameters(), 0.1);
  GraphedStep refused(sgd, [] {});
  CHECK(refused.fell_back());
}

TEST_CASE("CapturedStep: warm-up, one recording, replays; same parameters as eager" * doctest::skip(!gpu())) {
  Net eager = make_net(7), graphed = make_net(7);
  FusedAdamWCuda opt_e(eager.model->parameters()), opt_g(graphed.model->parameters());
  opt_e.set_capturable(true);
  int host_calls = 0;  // the step function runs on the host for warm-up and the recording only
  auto train = [](Net& n, torch::optim::Optimizer& opt) {
    opt.zero_grad();
    torch::mse_loss(n.model->forward(n.x), n.y).backward();
    opt.step();
  };
  std::shared_ptr<CapturedStep> step = std::make_shared<CudaCapturedStep>(0, opt_g, [&] {
    ++host_calls;
    train(graphed, opt_g);
  }, 2);
  torch::manual_seed(8);
  for (int i = 0; i < 20; ++i) {
    auto x = torch::randn({32, 64}, torch::kCUDA), y = torch::randn({32, 64}, torch::kCUDA);
    eager.x.copy_(x);
    eager.y.copy_(y);
    graphed.x.copy_(x);
    graphed.y.copy_(y);
    train(eager, opt_e);
    const Status st = step->run();
    REQUIRE_MESSAGE(st.is_ok(), st.message());
  }
  torch::cuda::synchronize();
  CHECK(step->captured());
  CHECK(step->fallback_reason().empty());
  CHECK(host_calls == 3);
  auto pe = eager.model->parameters(), pg = graphed.model->parameters();
  for (std::size_t i = 0; i < pe.size(); ++i) CHECK(torch::allclose(pe[i], pg[i], 1e-5, 1e-6));

  torch::optim::SGD sgd(eager.model->parameters(), 0.1);
  CudaCapturedStep refused(0, sgd, [] {}, 1);
  CHECK_FALSE(refused.captured());
  CHECK_FALSE(refused.fallback_reason().empty());
}

TEST_CASE("bf16 autocast matmul stays within bf16 round-off of fp32" * doctest::skip(!gpu())) {
  torch::manual_seed(6);
  auto a = torch::randn({256, 512}, torch::kCUDA), b = torch::randn({512, 128}, torch::kCUDA);
  auto ref = torch::matmul(a.to(torch::kDouble), b.to(torch::kDouble));
  torch::Tensor out;
  {
    compat::AutocastGuard guard(c10::DeviceType::CUDA, true, at::kBFloat16);
    out = torch::matmul(a, b);
  }
  CHECK((out.scalar_type() == torch::kBFloat16));
  // Inputs rounded to bf16 (2^-9 relative each), sum of 512 products: relative to sqrt(512).
  const double err = (out.to(torch::kDouble) - ref).abs().max().item<double>() / std::sqrt(512.0);
  CHECK(err < 0.05);
}

TEST_CASE("the prefetcher stages batches on a side stream; the step's stream sees them complete" * doctest::skip(!gpu())) {
  constexpr int kBatches = 6;
  int produced = 0;
  accelkit::Prefetcher<std::pair<torch::Tensor, torch::Tensor>> batches(
      [&]() -> std::optional<std::pair<torch::Tensor, torch::Tensor>> {
        if (produced == kBatches) return std::nullopt;
        auto gen = at::detail::createCPUGenerator(100 + produced++);
        auto x = at::randn({1024, 1024}, gen);  // drawn in this order, as the reference is
        auto y = at::randint(0, 10, {1024}, gen);
        return std::make_pair(std::move(x), std::move(y));
      },
      accelkit::PrefetchOptions{2, torch::Device(torch::kCUDA, 0)});
  std::vector<torch::Tensor> xs, ys;
  for (int j = 0; j < kBatches; ++j) {
    auto gen = at::detail::createCPUGenerator(100 + j);
    xs.push_back(at::randn({1024, 1024}, gen));
    ys.push_back(at::randint(0, 10, {1024}, gen));
  }
  int i = 0;
  while (auto b = batches.next()) {
    CHECK(b->first.is_cuda());
    CHECK(b->second.is_cuda());
    REQUIRE(i < kBatches);
    // Used at once on the current stream: the event makes it wait for the side stream's copy.
    const torch::Tensor doubled = (b->first * 2).sum(1).cpu();
    const double diff = (doubled - (xs[i] * 2).sum(1)).abs().max().item<double>();
    torch::cuda::synchronize();
    const torch::Tensor on_host = b->first.cpu();
    std::string holds = "none";
    for (int j = 0; j < kBatches; ++j)
      if (torch::equal(on_host, xs[j])) holds = std::to_string(j);
    MESSAGE("batch " << i << ": max |sum diff| " << diff << "; after a device sync it holds batch " << holds);
    CHECK(torch::equal(on_host, xs[i]));
    CHECK(torch::allclose(doubled, (xs[i] * 2).sum(1), 1e-5, 1e-3));
    CHECK(torch::equal(b->second.cpu(), ys[i]));
    ++i;
  }
  CHECK(i == kBatches);
}

TEST_CASE("NVML readings agree with nvidia-smi" * doctest::skip(!gpu())) {
  const CudaProbe p = probe_cuda();
  REQUIRE_FALSE(p.gpus.empty());
  REQUIRE(p.gpus[0].nvml != nullptr);
  NvmlMonitor m(process_nvml(), p.gpus[0].nvml, "");
  auto s = m.sample();
  REQUIRE(s.ok());
  double total = 0;
  for (const auto& r : s.value())
    if (r.key == reading::memory_total_bytes && r.value) total = *r.value;
  const std::string cmd = "nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits --id=" + p.gpus[0].pci_bus_id;
  FILE* f = ::popen(cmd.c_str(), "r");
  REQUIRE(f != nullptr);
  double mib = 0;
  const int got = std::fscanf(f, "%lf", &mib);
  ::pclose(f);
  REQUIRE(got == 1);
  CHECK(total / (1024.0 * 1024.0) == doctest::Approx(mib).epsilon(0.01));
}
