// A fused SGD against torch::optim::SGD on fresh random inputs, on any device: the same
// parameters (a matrix, a vector, a 3-D tensor, a scalar-sized one) and the same gradients fed
// to both for `steps` steps, the learning rate cut halfway through on each optimizer's own
// options (a schedule), and checkpoints moved both ways (the fused optimizer's state saved and
// loaded into a torch::optim::SGD, and back) before more steps. Used by the CPU suite and the
// CUDA one with the same cases.
#pragma once

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace accelkit::test {

struct SgdCase {
  const char* name;
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
};

inline std::vector<SgdCase> sgd_cases() {
  return {{"plain", 0.05, 0, 0, 0, false},
          {"momentum", 0.02, 0.9, 0, 0, false},
          {"momentum, dampening, weight decay", 0.02, 0.9, 0.1, 1e-3, false},
          {"nesterov, weight decay", 0.01, 0.8, 0, 1e-2, true}};
}

inline torch::optim::SGDOptions sgd_options(const SgdCase& c) {
  return torch::optim::SGDOptions(c.lr).momentum(c.momentum).dampening(c.dampening).weight_decay(c.weight_decay).nesterov(
      c.nesterov);
}

// Runs both for `steps` steps with the same fresh gradients; returns the relative difference of
// the parameters, ||fused - reference|| / ||reference|| over all of them.
inline double sgd_steps_both(torch::optim::Optimizer& fused, std::vector<at::Tensor>& pf, torch::optim::Optimizer& ref,
                             std::vector<at::Tensor>& pr, int steps) {
  for (int s = 0; s < steps; ++s) {
    for (std::size_t i = 0; i < pf.size(); ++i) {
      const auto g = at::randn_like(pf[i]);
      pf[i].mutable_grad() = g.clone();
      pr[i].mutable_grad() = g.clone();
    }
    fused.step();
    ref.step();
  }
  // Over all parameters together: a one-element parameter near zero would make a per-tensor
  // ratio of one rounding difference (the kernel's fused multiply-add) look large.
  double num = 0, den = 0;
  for (std::size_t i = 0; i < pf.size(); ++i) {
    const auto a = pf[i].detach().to(at::kCPU).to(at::kDouble), b = pr[i].detach().to(at::kCPU).to(at::kDouble);
    num += (a - b).pow(2).sum().item<double>();
    den += b.pow(2).sum().item<double>();
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

struct SgdParity {
  double after_steps = 0;       // relative difference after the first `steps` steps (lr cut halfway)
  double fused_to_torch = 0;    // after the fused optimizer's checkpoint went into a torch::optim::SGD
  double torch_to_fused = 0;    // and a torch::optim::SGD's checkpoint into a fresh fused optimizer
};

// make(params, options) makes the fused optimizer under test. Seeds from `seed`.
inline SgdParity sgd_parity(const SgdCase& c, c10::Device device, std::uint64_t seed, int steps,
                            const std::function<std::shared_ptr<torch::optim::Optimizer>(
                                std::vector<at::Tensor>, torch::optim::SGDOptions)>& make) {
  at::manual_seed(seed);
  std::vector<at::Tensor> init{at::randn({257, 33}), at::randn({1000}), at::randn({3, 5, 7}), at::randn({1})};
  auto leaves = [&] {
    std::vector<at::Tensor> out;
    for (const auto& t : init) out.push_back(t.to(device).requires_grad_(true));
    return out;
  };
  auto pf = leaves(), pr = leaves();
  auto fused = make(pf, sgd_options(c));
  torch::optim::SGD ref(pr, sgd_options(c));
  SgdParity r;
  at::manual_seed(seed + 99);
  sgd_steps_both(*fused, pf, ref, pr, steps / 2);
  for (auto* o : {fused.get(), static_cast<torch::optim::Optimizer*>(&ref)})
    for (auto& g : o->param_groups()) static_cast<torch::optim::SGDOptions&>(g.options()).lr(c.lr / 2);
  r.after_steps = sgd_steps_both(*fused, pf, ref, pr, steps - steps / 2);

  // The fused optimizer's checkpoint into torch::optim::SGD over a copy of its parameters.
  auto copy = [&](const std::vector<at::Tensor>& ps) {
    std::vector<at::Tensor> out;
    for (const auto& p : ps) out.push_back(p.detach().clone().requires_grad_(true));
    return out;
  };
  std::stringstream a;
  {
    torch::serialize::OutputArchive out;
    fused->save(out);
    out.save_to(a);
  }
  auto pt = copy(pf);
  torch::optim::SGD loaded(pt, sgd_options(c));
  {
    torch::serialize::InputArchive in;
    in.load_from(a);
    loaded.load(in);
  }
  r.fused_to_torch = sgd_steps_both(*fused, pf, loaded, pt, 5);

  // torch::optim::SGD's checkpoint into a fresh fused optimizer.
  std::stringstream b;
  {
    torch::serialize::OutputArchive out;
    ref.save(out);
    out.save_to(b);
  }
  auto pg = copy(pr);
  auto fresh = make(pg, sgd_options(c));
  {
    torch::serialize::InputArchive in;
    in.load_from(b);
    fresh->load(in);
  }
  r.torch_to_fused = sgd_steps_both(*fresh, pg, ref, pr, 5);
  return r;
}

}  // namespace accelkit::test
