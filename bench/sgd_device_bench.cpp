// accelkit_bench_sgd_device: one SGD step on the device accelkit negotiates (ACCELKIT_DEVICE picks
// another), the way a program gets it - Runtime::make_sgd, the device's fused SGD where it has one
// (the CUDA plugin: LibTorch's at::_fused_sgd_) - against torch::optim::SGD (one op chain per
// parameter) on the same parameters, in alternating rounds after warm-up; medians, with the bytes
// moved over the step's time. Parameters: `--tensors` x [W, W] (default 4 x 5120^2 = 104.9M),
// momentum 0.9, Nesterov, weight decay 1e-4 (SGD with momentum reads p, g, buf and writes p, buf:
// 20 bytes per fp32 parameter). Before timing, 5 steps of each from the same params and grads
// are compared (relative error of the parameters).
//
//   accelkit_bench_sgd_device [--width W] [--tensors N] [--rounds R] [--warmup K]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/sgd.h>

#include "accelkit/device_sync.hpp"
#include "accelkit/log.hpp"
#include "accelkit/runtime.hpp"
#include "bench_timing.hpp"

namespace {

using accelkit::bench_timing::Clock;
using accelkit::bench_timing::median;
using accelkit::bench_timing::ms_since;

struct Variant {
  std::string name;
  std::vector<at::Tensor> params;
  std::shared_ptr<torch::optim::Optimizer> opt;
  std::vector<double> ms;
};

std::vector<at::Tensor> make_params(int tensors, int64_t width, c10::Device device) {
  at::manual_seed(7);
  std::vector<at::Tensor> out;
  for (int i = 0; i < tensors; ++i) {
    out.push_back(at::randn({width, width}, at::TensorOptions().device(device)));
    out.back().mutable_grad() = at::randn_like(out.back());
  }
  return out;
}

double rel_err(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i].to(at::kDouble) - b[i].to(at::kDouble)).pow(2).sum().item<double>();
    den += b[i].to(at::kDouble).pow(2).sum().item<double>();
  }
  return den == 0 ? num : std::sqrt(num / den);
}

}  // namespace

int main(int argc, char** argv) try {
  int64_t width = 5120;
  int tensors = 4, rounds = 30, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--width") width = v;
    else if (a == "--tensors") tensors = v;
    else if (a == "--rounds") rounds = v;
    else if (a == "--warmup") warmup = v;
    else throw std::invalid_argument("unknown option " + a + " (--width, --tensors, --rounds, --warmup)");
  }
  if (width <= 0 || tensors <= 0 || rounds <= 0 || warmup < 0)
    throw std::invalid_argument("--width, --tensors and --rounds must be positive, --warmup not negative");
  accelkit::init_logging(accelkit::LogLevel::warn);
  auto rt = accelkit::Runtime::start({});
  const c10::Device device = rt->device();
  accelkit::SGDConfig c;
  c.lr = 1e-3;
  c.momentum = 0.9;
  c.nesterov = true;
  c.weight_decay = 1e-4;
  const auto options = torch::optim::SGDOptions(c.lr).momentum(c.momentum).nesterov(true).weight_decay(c.weight_decay);

  std::vector<Variant> v(2);
  v[0].name = "torch::optim::SGD";
  v[0].params = make_params(tensors, width, device);
  v[0].opt = std::make_shared<torch::optim::SGD>(v[0].params, options);
  v[1].params = make_params(tensors, width, device);
  auto choice = rt->make_sgd(v[1].params, c);
  v[1].name = choice.implementation;
  v[1].opt = choice.optimizer;
  const double params = static_cast<double>(tensors) * static_cast<double>(width) * static_cast<double>(width);
  std::printf("SGD step on %s: %d x [%lld, %lld] = %.1fM fp32 parameters, momentum 0.9, Nesterov, weight decay 1e-4\n",
              device.str().c_str(), tensors, static_cast<long long>(width), static_cast<long long>(width), params / 1e6);
  std::printf("accelkit: %s (%s)\n", choice.implementation.c_str(), choice.why.c_str());

  for (int s = 0; s < 5; ++s)
    for (auto& x : v) x.opt->step();
  accelkit::detail::synchronize(device);
  const double err = rel_err(v[1].params, v[0].params);
  std::printf("after 5 steps from the same params and grads: relative difference %.3g (%s)\n", err,
              err <= 1e-6 ? "within 1e-6" : "OVER 1e-6");

  for (int r = 0; r < warmup + rounds; ++r)
    for (auto& x : v) {
      accelkit::detail::synchronize(device);
      const auto t = Clock::now();
      x.opt->step();
      accelkit::detail::synchronize(device);
      if (r >= warmup) x.ms.push_back(ms_since(t));
    }
  const double bytes = 20.0 * params;  // read p, g, buf; write p, buf
  const double base = median(v[0].ms);
  for (const auto& x : v) {
    const double m = median(x.ms);
    std::printf("%-60s median %8.3f ms  %7.1f GB/s  %.2fx torch::optim::SGD\n", x.name.c_str(), m, bytes / m / 1e6,
                base / m);
  }
  return err <= 1e-6 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "accelkit_bench_sgd_device: %s\n", e.what());
  return 2;
}
