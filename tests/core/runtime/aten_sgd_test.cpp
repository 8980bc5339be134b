// LibTorch's fused SGD through support::AtenFusedSGD against torch::optim::SGD on the CPU (fresh
// random inputs; ACCELKIT_TEST_SEED fixes them): 50 steps with a learning-rate cut, checkpoints
// both ways (tests/sgd_parity.hpp; the CUDA suite runs the same cases on the GPU).
#include <ATen/ATen.h>

#include "torch_doctest.hpp"

#include <string>

#include "accelkit/sdk/support/aten_fused_sgd.hpp"
#include "sgd_parity.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace aten_sgd_suite {

using namespace accelkit;

TEST_CASE("AtenFusedSGD matches torch::optim::SGD over 50 steps, and checkpoints move both ways") {
  auto make = [](std::vector<at::Tensor> p, torch::optim::SGDOptions o) -> std::shared_ptr<torch::optim::Optimizer> {
    return std::make_shared<support::AtenFusedSGD>(std::move(p), o);
  };
  if (!support::AtenFusedSGD::available(c10::DeviceType::CPU)) {
    MESSAGE("skipped: LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR
                                 << " has no CPU kernel for at::_fused_sgd_ (from 2.4)");
    std::vector<at::Tensor> p{at::zeros({2}, at::requires_grad())};
    p[0].mutable_grad() = at::ones({2});
    support::AtenFusedSGD opt(p, torch::optim::SGDOptions(0.1));
    CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("no fused SGD kernel"), c10::Error);
    return;
  }
  const auto seed = test::test_seed();
  CAPTURE(seed);
  for (const auto& c : test::sgd_cases()) {
    const std::string name = c.name;
    CAPTURE(name);
    const auto r = test::sgd_parity(c, at::kCPU, seed, 50, make);
    CHECK(r.after_steps <= 1e-6);
    CHECK(r.fused_to_torch <= 1e-6);
    CHECK(r.torch_to_fused <= 1e-6);
    MESSAGE(name << ": " << r.after_steps << " after 50 steps, " << r.fused_to_torch << " / " << r.torch_to_fused
                   << " after the checkpoints");
  }
}

TEST_CASE("AtenFusedSGD refuses sparse gradients and keeps SGD's Nesterov rule") {
  CHECK_THROWS(support::AtenFusedSGD({at::zeros({2}, at::requires_grad())}, torch::optim::SGDOptions(0.1).nesterov(true)));
  if (!support::AtenFusedSGD::available(c10::DeviceType::CPU)) return;
  auto p = at::zeros({4}, at::requires_grad());
  p.mutable_grad() = at::ones({4}).to_sparse();
  support::AtenFusedSGD opt({p}, torch::optim::SGDOptions(0.1));
  CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("sparse"), c10::Error);
}

}  // namespace aten_sgd_suite
