// Runtime::quantize on TorchScript modules made here: every aten::linear with a constant fp32
// weight becomes the engine's quantized::linear_dynamic, the rest is left alone, the outputs on
// fresh random inputs stay close to an fp64 run of the same module, the report accounts for
// every layer and the sizes, and the caller's module is untouched.
#include <torch/torch.h>

#include <sstream>

#include "accelkit/inference.hpp"
#include "accelkit/quantize.hpp"
#include "accelkit/runtime.hpp"
#include "cpu_runtime.hpp"
#include "script_models.hpp"
#include "test_support.hpp"

#include "torch_doctest.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace quantize_suite {

using namespace accelkit;
using namespace accelkit::test;

namespace {

std::unique_ptr<Runtime> start() { return start_cpu_runtime(); }

// The module run in fp64 (a deep copy), the reference for a lossy fast path.
std::vector<at::Tensor> fp64_outputs(const torch::jit::Module& module, const std::vector<at::Tensor>& inputs) {
  torch::jit::Module m = module.deepcopy();
  m.eval();
  m.to(at::kDouble);
  torch::NoGradGuard no_grad;
  const test::Fp32Thread fp32;
  std::vector<c10::IValue> args;
  for (const auto& x : inputs) args.emplace_back(x.to(at::kDouble));
  return flatten_outputs(m.forward(args));
}

// Without autocast (Runtime::start turned the plan's on for this thread): int8 alone.
std::vector<at::Tensor> run(torch::jit::Module& m, const std::vector<at::Tensor>& inputs) {
  torch::NoGradGuard no_grad;
  const test::Fp32Thread fp32;
  return flatten_outputs(m.forward(std::vector<c10::IValue>(inputs.begin(), inputs.end())));
}

struct Error {
  double rel = 0;
  double cosine = 0;
};
Error error(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& ref) {
  REQUIRE(got.size() == ref.size());
  double num = 0, den = 0, dot = 0, ng = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].sizes() == ref[i].sizes());
    CHECK((got[i].scalar_type() == at::kFloat));
    const at::Tensor g = got[i].to(at::kDouble), r = ref[i].to(at::kDouble);
    num += (g - r).pow(2).sum().item<double>();
    den += r.pow(2).sum().item<double>();
    dot += (g * r).sum().item<double>();
    ng += g.pow(2).sum().item<double>();
  }
  return {std::sqrt(num / den), dot / std::sqrt(ng * den)};
}

std::string text_of(const std::vector<std::string>& lines) {
  std::string t;
  for (const std::string& l : lines) t += l + '\n';
  return t;
}

int count_nodes(const torch::jit::Module& m, const char* kind) {
  int n = 0;
  for (const torch::jit::Node* node : m.get_method("forward").graph()->nodes())
    n += node->kind() == c10::Symbol::fromQualString(kind);
  return n;
}

}  // namespace

TEST_CASE("a Linear stack: every layer int8, outputs within 1% of fp64 on fresh inputs, a quarter of the bytes") {
  const auto rt = start();
  REQUIRE(rt->device_handle()->info().capabilities.has(Capability::int8_linear));
  INFO("seed " << test_seed());
  torch::jit::Module model = script_linear_stack(256, 3, test_seed());
  at::manual_seed(test_seed() + 1);
  const std::vector<at::Tensor> example{at::randn({16, 256})};
  const std::vector<at::Tensor> before = run(model, example);

  QuantizedModule q = accelkit::quantize(*rt, model, {}, example);
  const QuantizeReport& r = q.report;
  INFO(r.summary());
  CHECK(r.engine == rt->device_handle()->info().capabilities.extra.at(kInt8EngineKey));
  CHECK(r.converted == 3);
  CHECK(r.skipped == 0);
  REQUIRE(r.layers.size() == 3);
  CHECK(r.layers[0].name == "w0");
  CHECK(r.layers[0].in_features == 256);
  CHECK(r.layers[0].out_features == 256);
  CHECK(count_nodes(q.module, "aten::linear") == 0);
  CHECK(count_nodes(q.module, "quantized::linear_dynamic") == 3);
  // 3 x 256 x 256 fp32 weights + biases -> int8 weights, their scales, the same fp32 biases.
  CHECK(r.bytes_before == 3 * (256 * 256 + 256) * 4);
  CHECK(r.bytes_after == 3 * (256 * 256 + 8 * 256 + 256 * 4));
  REQUIRE(r.cosine);
  // Random networks' int8 error has a tail: 150 seeds read 0.99943 at the lowest, one seed in
  // a few hundred 0.9989 (13959090599451066000). A broken int8 path reads far below either.
  CHECK(*r.cosine >= 0.998);
  CHECK(*r.rel_error <= 0.05);
  CHECK(*r.max_rel_error <= 0.1);

  // Fresh inputs, against the same module in fp64.
  const std::vector<at::Tensor> fresh{at::randn({8, 256})};
  const Error e = error(run(q.module, fresh), fp64_outputs(model, fresh));
  CHECK(e.cosine >= 0.999);
  CHECK(e.rel <= 0.05);
  CHECK(e.rel > 1e-6);  // int8 really ran: fp32 alone would be within 1e-6

  // The caller's module is as it was.
  CHECK(count_nodes(model, "aten::linear") == 3);
  CHECK(at::equal(run(model, example)[0], before[0]));
}

TEST_CASE("a CNN: its Linear int8, the convolutions untouched; two inputs: the linear converted, the matmul kept") {
  const auto rt = start();
  INFO("seed " << test_seed());
  torch::jit::Module cnn = script_cnn(test_seed());
  at::manual_seed(test_seed() + 2);
  QuantizedModule q = accelkit::quantize(*rt, cnn, {}, {at::randn({4, 3, 32, 32})});
  INFO(q.report.summary());
  CHECK(q.report.converted == 1);
  CHECK(count_nodes(q.module, "quantized::linear_dynamic") == 1);
  CHECK(count_nodes(q.module, "aten::conv2d") + count_nodes(q.module, "aten::_convolution") == 2);
  const std::vector<at::Tensor> fresh{at::randn({2, 3, 32, 32})};
  const Error e = error(run(q.module, fresh), fp64_outputs(cnn, fresh));
  CHECK(e.cosine >= 0.999);
  {
    // Under the runtime's autocast (bf16 convolutions where the plan says so) it still runs:
    // the quantized Linear takes its input as fp32.
    torch::NoGradGuard no_grad;
    auto ac = rt->autocast();
    const at::Tensor y = q.module.forward({fresh[0]}).toTensor();
    CHECK((y.scalar_type() == at::kFloat));
    CHECK(error({y}, fp64_outputs(cnn, fresh)).cosine >= 0.99);
  }

  torch::jit::Module two = script_two_inputs(test_seed());
  QuantizedModule q2 = accelkit::quantize(*rt, two, {}, {at::randn({5, 24}), at::randn({5, 16})});
  INFO(q2.report.summary());
  CHECK(q2.report.converted == 1);
  CHECK(q2.report.layers.at(0).name == "w1");
  const std::vector<at::Tensor> fresh2{at::randn({3, 24}), at::randn({3, 16})};
  const auto got = run(q2.module, fresh2);
  const auto ref = fp64_outputs(two, fresh2);
  CHECK(error({got[0]}, {ref[0]}).cosine >= 0.999);
  CHECK(at::allclose(got[1], ref[1].to(at::kFloat), 1e-5, 1e-5));  // untouched: fp32 exact
}

TEST_CASE("small layers stay fp32 with the reason; nothing asked is refused; the summary names every layer") {
  const auto rt = start();
  torch::jit::Module small = script_linear_stack(8, 2, test_seed());
  QuantizedModule q = accelkit::quantize(*rt, small, {}, {at::randn({4, 8})});
  CHECK(q.report.converted == 0);
  CHECK(q.report.skipped == 2);
  CHECK(q.report.layers.at(0).why.find("8 input features") != std::string::npos);
  CHECK(*q.report.rel_error == 0);  // nothing converted: the frozen module computes the same
  const std::string s = q.report.summary();
  CHECK(s.find("fp32  w0 (8 -> 8)") != std::string::npos);
  CHECK(s.find("0 layers converted, 2 kept") != std::string::npos);

  QuantizeOptions all;
  all.min_in_features = 1;
  CHECK(accelkit::quantize(*rt, small, all).report.converted == 2);

  QuantizeOptions none;
  none.linear = QuantDtype::none;
  CHECK_THROWS_AS(accelkit::quantize(*rt, small, none), std::invalid_argument);
  try {
    accelkit::quantize(*rt, small, {}, {at::randn({4, 9})});
    FAIL("no error for inputs the module refuses");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("refuses the example inputs") != std::string::npos);
  }
}

TEST_CASE("static int8: a CNN's convolutions and Linear in int8, calibrated on the example inputs; close to fp64 on fresh ones") {
  const auto rt = start();
  INFO("seed " << test_seed());
  torch::jit::Module cnn = script_cnn(test_seed());
  at::manual_seed(test_seed() + 3);
  // Calibration sees enough samples that fresh ones rarely leave its ranges (outputs beyond
  // the calibrated range are clipped: that is static quantization, and why it calibrates).
  const std::vector<at::Tensor> calibration{at::randn({64, 3, 32, 32})};
  const std::vector<at::Tensor> before = run(cnn, calibration);
  std::vector<at::Tensor> weights_before;
  for (const at::Tensor& p : cnn.parameters()) weights_before.push_back(p.clone());
  QuantizeOptions o;
  o.conv = QuantDtype::int8;
  QuantizedModule q = accelkit::quantize(*rt, cnn, o, calibration);
  const QuantizeReport& r = q.report;
  INFO(r.summary());
  CHECK(r.scheme.find("static int8") == 0);
  CHECK(r.converted == 3);
  CHECK(r.skipped == 0);
  REQUIRE(r.layers.size() == 3);
  CHECK(r.layers[0].name == "c1w");
  CHECK(r.layers[0].kind == "conv");
  CHECK(r.layers[0].in_features == 3);
  CHECK(r.layers[0].out_features == 16);
  CHECK(r.layers[2].kind == "linear");
  CHECK(r.bytes_after < r.bytes_before / 2);
  // The graph: the engine's int8 convolutions and Linear, no fp32 ones left.
  int qconv = 0, qlinear = 0, fp32_layers = 0;
  for (const torch::jit::Node* n : q.module.get_method("forward").graph()->nodes()) {
    const std::string k = n->kind().toQualString();
    qconv += k.rfind("quantized::conv2d", 0) == 0;
    qlinear += k.rfind("quantized::linear", 0) == 0;
    fp32_layers += k == "aten::conv2d" || k == "aten::_convolution" || k == "aten::linear";
  }
  CHECK(qconv == 2);
  CHECK(qlinear == 1);
  CHECK(fp32_layers == 0);
  REQUIRE(r.cosine);
  // Random networks' int8 error has a tail: 150 seeds read 0.99943 at the lowest, one seed in
  // a few hundred 0.9989 (13959090599451066000). A broken int8 path reads far below either.
  CHECK(*r.cosine >= 0.998);

  // Fresh inputs from the same distribution, against the module in fp64.
  const std::vector<at::Tensor> fresh{at::randn({4, 3, 32, 32})};
  const Error e = error(run(q.module, fresh), fp64_outputs(cnn, fresh));
  CHECK(e.cosine >= 0.99);
  CHECK(e.rel <= 0.1);
  CHECK(e.rel > 1e-6);  // int8 really ran
  // The caller's module is as it was: its weights bit for bit, its outputs within fp32's
  // rounding (the CPU plugin's per-shape choice may run a convolution by another kernel on a
  // later call: operator_kernels.cpp).
  std::size_t i = 0;
  for (const at::Tensor& p : cnn.parameters()) {
    REQUIRE(i < weights_before.size());
    CHECK(at::equal(p, weights_before[i++]));
  }
  CHECK(i == weights_before.size());
  CHECK(at::allclose(run(cnn, calibration)[0], before[0], 1e-5, 1e-5));
}

TEST_CASE("static int8: pytorch/examples' MNIST network, its view after a convolution runs as reshape and says so") {
  const auto rt = start();
  INFO("seed " << test_seed());
  torch::jit::Module mnist = script_mnist(test_seed());
  at::manual_seed(test_seed() + 4);
  QuantizeOptions o;
  o.conv = QuantDtype::int8;
  QuantizedModule q = accelkit::quantize(*rt, mnist, o, {at::randn({256, 1, 28, 28})});
  INFO(q.report.summary());
  CHECK(q.report.converted == 4);
  REQUIRE(q.report.layers.size() == 4);
  CHECK(q.report.layers[0].name == "conv1");
  CHECK(q.report.layers[3].name == "fc2");
  const std::string notes = text_of(q.report.notes);
  CHECK(notes.find("1 view of the forward made reshape") != std::string::npos);
  const std::vector<at::Tensor> fresh{at::randn({5, 1, 28, 28})};
  const auto got = run(q.module, fresh);
  REQUIRE(got.at(0).sizes() == at::IntArrayRef({5, 10}));
  // Log-probabilities: the int8 network's class probabilities match fp64's. (Calibrated on 32
  // images, a fresh one beyond their range now and then was clipped: cosine 0.983 for one seed
  // in ~50; on 256, the lowest of 150 seeds read 0.998. An untrained network's top two classes
  // are often within int8's error of each other, so the classes themselves are not compared.)
  const at::Tensor ref = fp64_outputs(mnist, fresh).at(0);
  CHECK(error({got[0].exp()}, {ref.exp()}).cosine >= 0.99);
}

TEST_CASE("static int8: a branch the example inputs never take is named in the notes, and the module still runs") {
  const auto rt = start();
  INFO("seed " << test_seed());
  at::manual_seed(test_seed());
  torch::jit::Module m("Branchy");
  m.register_parameter("wa", at::randn({16, 3, 3, 3}).mul_(0.2), false);
  m.register_parameter("wb", at::randn({16, 3, 3, 3}).mul_(0.2), false);
  m.register_parameter("fw", at::randn({4, 16}).mul_(0.2), false);
  m.define(R"(
def forward(self, x):
    if bool(x.sum() > 1.0e9):
        y = torch.relu(torch.conv2d(x, self.wb))
    else:
        y = torch.relu(torch.conv2d(x, self.wa))
    return torch.linear(torch.mean(y, [2, 3]), self.fw)
)");
  QuantizeOptions o;
  o.conv = QuantDtype::int8;
  const std::vector<at::Tensor> calibration{at::randn({16, 3, 12, 12})};
  QuantizedModule q = accelkit::quantize(*rt, m, o, calibration);
  INFO(q.report.summary());
  CHECK(text_of(q.report.notes).find("never reached by the example inputs") != std::string::npos);
  REQUIRE(q.report.cosine);
  // The branch taken was calibrated, so its output follows fp32's. A random network's int8
  // error has a tail: 40 seeds read 0.9979 at the lowest, and one run in CI 0.980 (each seed
  // the same figure under MALLOC_PERTURB_: no uninitialised memory is read).
  CHECK(*q.report.cosine >= 0.97);
  const auto got = run(q.module, {at::randn({2, 3, 12, 12})});
  CHECK(got.at(0).sizes() == at::IntArrayRef({2, 4}));
}

TEST_CASE("static int8: a branch the module's attributes rule out is no unseen value") {
  // As torchvision's MobileNetV2 blocks: `if self.use_res: ...`, false for this instance. The
  // branch never runs for any input, so its observers' ranges are no calibration gap.
  const auto rt = start();
  at::manual_seed(test_seed());
  torch::jit::Module m("Residual");
  m.register_parameter("w", at::randn({8, 8, 3, 3}).mul_(0.2), false);
  m.register_parameter("fw", at::randn({4, 8}).mul_(0.2), false);
  m.register_attribute("use_res", c10::BoolType::get(), false);
  m.define(R"(
def forward(self, x):
    y = torch.relu(torch.conv2d(x, self.w, None, [1, 1], [1, 1]))
    if self.use_res:
        y = torch.relu(torch.conv2d(y, self.w, None, [1, 1], [1, 1])) + x
    return torch.linear(torch.mean(y, [2, 3]), self.fw)
)");
  QuantizeOptions o;
  o.conv = QuantDtype::int8;
  QuantizedModule q = accelkit::quantize(*rt, m, o, {at::randn({4, 8, 10, 10})});
  INFO(q.report.summary());
  CHECK(text_of(q.report.notes).find("never reached") == std::string::npos);
  REQUIRE(q.report.cosine);
  // Only the branch that runs is quantized, so the output follows fp32's, within a random
  // network's int8 tail: over seeds 1-1000 the cosine read 0.9816 at the lowest and below 0.99
  // for 9 of them (one failed a CI run at 0.9891 when this bound was 0.99).
  CHECK(*q.report.cosine >= 0.97);
}

TEST_CASE("static int8 is refused without example inputs, without int8 Linear, and on inputs the module refuses") {
  const auto rt = start();
  torch::jit::Module cnn = script_cnn(test_seed());
  QuantizeOptions o;
  o.conv = QuantDtype::int8;
  try {
    accelkit::quantize(*rt, cnn, o);
    FAIL("no error without example inputs");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("calibrated") != std::string::npos);
  }
  QuantizeOptions no_linear = o;
  no_linear.linear = QuantDtype::none;
  CHECK_THROWS_AS(accelkit::quantize(*rt, cnn, no_linear, {at::randn({2, 3, 32, 32})}), std::invalid_argument);
  try {
    accelkit::quantize(*rt, cnn, o, {at::randn({2, 3, 20, 20})});
    FAIL("no error for inputs the module refuses");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("refuses the example inputs") != std::string::npos);
  }
}

}  // namespace quantize_suite
