// The out-of-tree example plugin's SimpleAdamW against torch::optim::AdamW: the same params and
// fresh random grads for 200 steps, odd sizes (tails, one split across threads), weight decay,
// amsgrad and maximize (fed to torch as -grad); params and state within 1e-6 relative. And a
// checkpoint from one class continues exactly in the other.
#include <torch/torch.h>

#include "torch_doctest.hpp"

#include <sstream>
#include <vector>

#include <accelkit/sdk/torch_compat.hpp>

#include "simple_adamw.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace example_adamw_suite {

using torch::optim::AdamW;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

namespace {

double rel_err(const torch::Tensor& a, const torch::Tensor& b, double scale) {
  const auto a64 = a.to(torch::kDouble), b64 = b.to(torch::kDouble);
  const double den = std::max(b64.norm().item<double>(), scale);
  return (a64 - b64).norm().item<double>() / den;
}

AdamWParamState& state_of(torch::optim::Optimizer& opt, const torch::Tensor& p) {
  return static_cast<AdamWParamState&>(*opt.state().at(accelkit::compat::optimizer_state_key(opt.state(), p)));
}

const std::vector<int64_t> kSizes{1, 7, 33, 1023, 65537, 100003};

std::vector<torch::Tensor> make_params() {
  std::vector<torch::Tensor> ps;
  for (int64_t n : kSizes) ps.push_back(torch::randn({n}));
  return ps;
}

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> out;
  for (const auto& p : ps) out.push_back(p.clone());
  return out;
}

void set_grads(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, bool maximize) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto g = torch::randn_like(a[i]);
    a[i].mutable_grad() = g;
    b[i].mutable_grad() = maximize ? -g : g.clone();
  }
}

// Saves `from` to an in-memory checkpoint and loads it into `to`.
void copy_state(torch::optim::Optimizer& from, torch::optim::Optimizer& to) {
  std::stringstream bytes;
  torch::serialize::OutputArchive out;
  from.save(out);
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  to.load(in);
}

}  // namespace

TEST_CASE("SimpleAdamW matches torch::optim::AdamW after 200 steps") {
  for (bool amsgrad : {false, true}) {
    for (bool maximize : {false, true}) {
      CAPTURE(amsgrad);
      CAPTURE(maximize);
      torch::manual_seed(amsgrad * 2 + maximize + 11);
      const auto opts = AdamWOptions(1e-3).weight_decay(0.05).amsgrad(amsgrad);
      auto ps = make_params();
      auto rs = clones(ps);
      std::vector<double> init;
      for (const auto& p : ps) init.push_back(p.norm().item<double>());
      cpu_variant::SimpleAdamW simple(ps, opts, maximize);
      AdamW ref(rs, opts);
      for (int step = 0; step < 200; ++step) {
        set_grads(ps, rs, maximize);
        simple.step();
        ref.step();
      }
      for (std::size_t i = 0; i < ps.size(); ++i) {
        CAPTURE(kSizes[i]);
        CHECK(rel_err(ps[i], rs[i], init[i]) <= 1e-6);
        auto& s = state_of(simple, ps[i]);
        auto& r = state_of(ref, rs[i]);
        const double unit = std::sqrt(static_cast<double>(ps[i].numel()));
        CHECK(s.step() == r.step());
        CHECK(rel_err(s.exp_avg(), r.exp_avg(), unit) <= 1e-6);
        CHECK(rel_err(s.exp_avg_sq(), r.exp_avg_sq(), unit) <= 1e-6);
        if (amsgrad) CHECK(rel_err(s.max_exp_avg_sq(), r.max_exp_avg_sq(), unit) <= 1e-6);
      }
    }
  }
}

TEST_CASE("a torch::optim::AdamW checkpoint continues in SimpleAdamW, and back") {
  torch::manual_seed(5);
  const auto opts = AdamWOptions(2e-3).weight_decay(0.01);
  auto ps = make_params();
  auto rs = clones(ps);
  AdamW first(ps, opts);
  AdamW ref(rs, opts);
  for (int step = 0; step < 20; ++step) {
    set_grads(ps, rs, false);
    first.step();
    ref.step();
  }
  cpu_variant::SimpleAdamW simple(ps, opts, false);
  copy_state(first, simple);
  for (int step = 0; step < 20; ++step) {
    set_grads(ps, rs, false);
    simple.step();
    ref.step();
  }
  for (std::size_t i = 0; i < ps.size(); ++i) {
    CAPTURE(kSizes[i]);
    CHECK(state_of(simple, ps[i]).step() == 40);
    CHECK(rel_err(ps[i], rs[i], 1.0) <= 1e-6);
  }
  // And back: SimpleAdamW's state loads into torch::optim::AdamW.
  AdamW back(clones(ps), opts);
  copy_state(simple, back);
  const auto& bp = back.param_groups()[0].params();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    auto& b = state_of(back, bp[i]);
    CHECK(b.step() == 40);
    CHECK(rel_err(b.exp_avg(), state_of(simple, ps[i]).exp_avg(), 1.0) == 0);
  }
}

}  // namespace example_adamw_suite
