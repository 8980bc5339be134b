// Runtime::optimize_for_inference on TorchScript modules made here (a Linear stack, a small
// CNN, two inputs and two outputs): the chosen candidate's outputs match the module's own on
// fresh inputs within the stated tolerance, every candidate is accounted for, the decision is
// cached, and bad input is refused.
#include <torch/torch.h>

#include <thread>

#include "accelkit/inference.hpp"
#include "accelkit/runtime.hpp"
#include "cpu_runtime.hpp"
#include "script_models.hpp"
#include "test_support.hpp"

#include "torch_doctest.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace inference_suite {

using namespace accelkit;
using namespace accelkit::test;

namespace {

std::unique_ptr<Runtime> start(std::vector<std::pair<std::string, std::string>> cli = {}) {
  return start_cpu_runtime(std::move(cli));
}

InferenceOptions quick() {
  InferenceOptions o;
  o.warmup = 1;
  o.reps = 2;
  return o;
}

// The module's own outputs, fp32, no autograd.
std::vector<at::Tensor> reference(torch::jit::Module m, const std::vector<at::Tensor>& inputs) {
  m.eval();
  torch::NoGradGuard no_grad;
  // fp32: the runtime's plan turns bf16 autocast on for this thread on a CPU with native bf16.
  const test::Fp32Thread fp32;
  return flatten_outputs(m.forward(std::vector<c10::IValue>(inputs.begin(), inputs.end())));
}

// ||a - b|| / ||b|| over all outputs, in double.
double rel_error(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].sizes() == b[i].sizes());
    CHECK((a[i].scalar_type() == at::kFloat));  // fp32 out, whatever ran inside
    num += (a[i].to(at::kDouble) - b[i].to(at::kDouble)).pow(2).sum().item<double>();
    den += b[i].to(at::kDouble).pow(2).sum().item<double>();
  }
  return std::sqrt(num / den);
}

void check_model(Runtime& rt, const torch::jit::Module& m, const std::function<std::vector<at::Tensor>()>& make_inputs) {
  auto fast = accelkit::optimize_for_inference(rt, m, make_inputs(), quick());
  const InferenceDecision& d = fast->decision();
  CAPTURE(d.chosen);
  CAPTURE(d.why);
  CHECK(d.origin == "benchmark");
  CHECK(d.trials.size() == 7);
  std::size_t accepted = 0;
  for (const auto& t : d.trials) {
    CAPTURE(t.candidate);
    CHECK_FALSE(t.note.empty());  // each says why it was or was not chosen
    if (t.accepted) ++accepted;
  }
  CHECK(accepted >= 2);  // as loaded and frozen at least
  const bool reduced = d.chosen.rfind("bf16", 0) == 0;
  for (int trial = 0; trial < 3; ++trial) {  // fresh inputs, not the examples it was timed on
    const auto inputs = make_inputs();
    const double err = rel_error(fast->run(inputs), reference(m, inputs));
    // fp32 candidates: only the order of sums differs; bf16: 8 significant bits per weight and
    // activation, through a few layers (the acceptance bound).
    CHECK(err <= (reduced ? 5e-2 : 1e-4));
  }
}

}  // namespace

TEST_CASE("optimize_for_inference: a Linear stack, a CNN and a two-input module keep their outputs") {
  TempDir cache;
  ScopedEnv env("ACCELKIT_CACHE_DIR", cache.str());
  auto rt = start();
  SUBCASE("Linear stack") {
    check_model(*rt, script_linear_stack(256, 4, 1), [] { return std::vector<at::Tensor>{at::randn({16, 256})}; });
  }
  SUBCASE("CNN") {
    check_model(*rt, script_cnn(2), [] { return std::vector<at::Tensor>{at::randn({8, 3, 32, 32})}; });
  }
  SUBCASE("pytorch/examples' MNIST network: its view after the convolutions") {
    const torch::jit::Module mnist = script_mnist(4);
    check_model(*rt, mnist, [] { return std::vector<at::Tensor>{at::randn({16, 1, 28, 28})}; });
    // The channels-last candidates run: x.view(-1, 320) on a channels-last activation became
    // reshape, and the trial says so.
    InferenceOptions o = quick();
    o.use_cache = false;
    const auto d = accelkit::optimize_for_inference(*rt, mnist, {at::randn({16, 1, 28, 28})}, o)->decision();
    // The bf16 one runs only where the device has native bf16 (an AVX2-only CPU does not): there
    // it is skipped, and its note says why.
    const bool bf16 = rt->device_handle()->info().capabilities.has(accelkit::Capability::bf16);
    int channels_last = 0;
    for (const auto& t : d.trials) {
      if (t.candidate.find("channels_last") == std::string::npos) continue;
      CAPTURE(t.candidate);
      CAPTURE(t.note);
      if (t.candidate.rfind("bf16", 0) == 0 && !bf16) {
        CHECK_FALSE(t.accepted);
        CHECK(t.note.find("has no native bf16") != std::string::npos);
        continue;
      }
      CHECK(t.accepted);
      CHECK(t.description.find("1 view made reshape") != std::string::npos);
      ++channels_last;
    }
    CHECK(channels_last == (bf16 ? 2 : 1));
  }
  SUBCASE("two inputs, two outputs") {
    check_model(*rt, script_two_inputs(3),
                [] { return std::vector<at::Tensor>{at::randn({4, 24}), at::randn({4, 16})}; });
  }
}

TEST_CASE("optimize_for_inference: the decision is cached; excluded candidates are not tried") {
  TempDir cache;
  ScopedEnv env("ACCELKIT_CACHE_DIR", cache.str());
  auto rt = start();
  accelkit::test::FakeProcStat quiet;  // a choice timed on a busy machine would not be cached
  const auto m = script_linear_stack(64, 2, 4);
  const std::vector<at::Tensor> x{at::randn({8, 64})};
  auto first = accelkit::optimize_for_inference(*rt, m, x, quick());
  REQUIRE_FALSE(first->decision().cache_file.empty());
  auto again = accelkit::optimize_for_inference(*rt, m, x, quick());
  CHECK(again->decision().origin == "cache");
  CHECK(again->decision().chosen == first->decision().chosen);
  CHECK(again->decision().trials.empty());
  // Another input shape is another decision.
  CHECK(accelkit::optimize_for_inference(*rt, m, {at::randn({2, 64})}, quick())->decision().origin == "benchmark");

  InferenceOptions only_fp32 = quick();
  only_fp32.use_cache = false;
  only_fp32.exclude = {"bf16", "bf16_channels_last", "bf16_optimized", "optimized", "frozen", "channels_last"};
  auto as_is = accelkit::optimize_for_inference(*rt, m, x, only_fp32);
  CHECK(as_is->decision().chosen == "as_is");
  CHECK(as_is->decision().cache_file.empty());
  for (const auto& t : as_is->decision().trials)
    if (t.candidate != "as_is") CHECK(t.note == "excluded by the caller");
}

TEST_CASE("optimize_for_inference: candidates timed while other processes took the cores are not cached") {
  TempDir cache;
  ScopedEnv env("ACCELKIT_CACHE_DIR", cache.str());
  auto rt = start();
  accelkit::test::FakeProcStat load;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto m = script_linear_stack(64, 2, 4);
  const std::vector<at::Tensor> x{at::randn({8, 64})};
  InferenceOptions o = quick();
  o.progress = [&](int i, int, const std::string&) {
    if (i == 1) load.add_busy_seconds(cores * 3600.0);  // every core taken while the candidates run
  };
  auto busy = accelkit::optimize_for_inference(*rt, m, x, o);
  INFO(busy->decision().why);
  CHECK(busy->decision().origin == "benchmark");
  CHECK(busy->decision().cache_file.empty());
  CHECK(busy->decision().why.find("not cached: while the candidates were timed, other processes kept") != std::string::npos);
  // Nothing was written: the next call times the candidates again.
  CHECK(accelkit::optimize_for_inference(*rt, m, x, quick())->decision().origin == "benchmark");
}

TEST_CASE("optimize_for_inference: bad input is refused with the reason") {
  auto rt = start();
  const auto m = script_linear_stack(32, 1, 5);
  CHECK_THROWS_AS(accelkit::optimize_for_inference(*rt, m, {}, quick()), std::invalid_argument);
  // Inputs the module rejects: every candidate fails, and the error says so.
  InferenceOptions o = quick();
  o.use_cache = false;
  try {
    accelkit::optimize_for_inference(*rt, m, {at::randn({4, 31})}, o);
    FAIL("accepted inputs of the wrong width");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(contains(what, "refuses the example inputs ([4, 31])"));
    CHECK(contains(what, "cannot be multiplied"));  // LibTorch's reason, not its traceback
    CHECK(what.find('\n') == std::string::npos);
  }
}

TEST_CASE("fp32 candidates are held to 1e-4, or to the TF32 tolerance where the plan runs TF32") {
  // Seen on an H200: conv-bn folding under TF32 moved ResNet-18's outputs by 2.6e-4, and the
  // frozen and channels-last fp32 candidates were refused against 1e-4.
  InferenceOptions o;
  CHECK(fp32_candidate_tolerance(o, false) == 1e-4);
  CHECK(fp32_candidate_tolerance(o, true) == 5e-3);
  o.fp32_tolerance = 1e-2;  // a caller's looser fp32 bound stands under TF32 too
  CHECK(fp32_candidate_tolerance(o, true) == 1e-2);
  o.fp32_tolerance = 1e-6;
  o.tf32_tolerance = 1e-3;
  CHECK(fp32_candidate_tolerance(o, false) == 1e-6);
  CHECK(fp32_candidate_tolerance(o, true) == 1e-3);
}

}  // namespace inference_suite
