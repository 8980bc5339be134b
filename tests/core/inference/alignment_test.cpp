// check_alignment: Linear, convolution and embedding sizes of TorchScript modules made here
// against the multiple a device states ("align.<dtype>"): the misaligned ones listed with the
// size to pad to, the aligned ones not, nothing checked without a statement; and through
// Runtime::check_alignment with the CPU plugin's own statement.
#include <torch/torch.h>

#include "accelkit/alignment.hpp"
#include "accelkit/runtime.hpp"
#include "cpu_runtime.hpp"
#include "script_models.hpp"
#include "test_support.hpp"

#include "torch_doctest.hpp"

namespace alignment_suite {

using namespace accelkit;

namespace {

DeviceInfo device_aligned_to(const char* dtype, const char* n) {
  DeviceInfo d;
  d.id = "test:0";
  d.capabilities.set(std::string("align.") + dtype, n);
  return d;
}

// Linear 60 -> 64, conv 3 -> 12 channels, an embedding of width 20.
torch::jit::Module mixed() {
  torch::jit::Module m("Mixed");
  m.register_parameter("fc", at::randn({64, 60}), false);
  m.register_parameter("conv", at::randn({12, 3, 3, 3}), false);
  m.register_parameter("table", at::randn({100, 20}), false);
  m.define(R"(
def forward(self, x, img, idx):
    a = torch.linear(x, self.fc)
    b = torch.conv2d(img, self.conv)
    c = torch.embedding(self.table, idx)
    return a, b, c
)");
  return m;
}

}  // namespace

TEST_CASE("misaligned sizes are listed with the next multiple; aligned ones are not") {
  const AlignmentReport r = check_alignment(mixed(), device_aligned_to("bf16", "8"), "bf16");
  INFO(r.summary());
  CHECK(r.multiple == 8);
  CHECK(r.layers == 3);
  REQUIRE(r.issues.size() == 4);
  CHECK(r.issues[0].layer == "fc");
  CHECK(r.issues[0].op == "linear");
  CHECK(r.issues[0].dim == "in_features");
  CHECK(r.issues[0].size == 60);
  CHECK(r.issues[0].padded == 64);  // out_features 64 is aligned: not listed
  CHECK(r.issues[1].dim == "in_channels");
  CHECK(r.issues[1].size == 3);
  CHECK(r.issues[1].padded == 8);
  CHECK(r.issues[2].dim == "out_channels");
  CHECK(r.issues[2].padded == 16);
  CHECK(r.issues[3].op == "embedding");
  CHECK(r.issues[3].dim == "embedding_dim");
  CHECK(r.issues[3].padded == 24);
  CHECK(r.summary().find("fc (linear) in_features 60 -> pad to 64") != std::string::npos);
  CHECK(r.issues[0].ms == 0);  // not measured unless asked

  // Measured: the Linear's GEMM as it is and padded; convolutions and embeddings are not timed.
  const AlignmentReport m = check_alignment(mixed(), device_aligned_to("bf16", "8"), "bf16", true);
  REQUIRE(m.issues.size() == 4);
  CHECK(m.issues[0].ms > 0);
  CHECK(m.issues[0].padded_ms > 0);
  CHECK(m.issues[0].timed_on == "64x60");
  CHECK(m.issues[1].ms == 0);  // a convolution needs the model's inputs
  CHECK(m.issues[3].ms == 0);
  CHECK(m.summary().find("measured on 64x60") != std::string::npos);
  REQUIRE(m.not_timed.size() == 1);
  CHECK(m.not_timed[0].find("1 convolution: their cost depends on the image") != std::string::npos);

  // Multiples of 4: only the odd ones.
  const AlignmentReport four = check_alignment(mixed(), device_aligned_to("fp32", "4"), "fp32");
  CHECK(four.issues.size() == 1);  // conv in_channels 3
  // Another dtype than the device states, or an unreadable statement: nothing checked, said so.
  const AlignmentReport none = check_alignment(mixed(), device_aligned_to("bf16", "8"), "fp16");
  CHECK(none.multiple == 0);
  CHECK(none.issues.empty());
  CHECK(none.summary().find("states no alignment for fp16") != std::string::npos);
  CHECK(check_alignment(mixed(), device_aligned_to("bf16", "eight"), "bf16").multiple == 0);
}

TEST_CASE("measured with the model's inputs: each misaligned convolution on the shape it sees in their forward") {
  const std::vector<at::Tensor> inputs = {at::randn({4, 60}), at::randn({2, 3, 16, 16}),
                                          at::randint(0, 100, {4}, at::TensorOptions().dtype(at::kLong))};
  for (const std::string dtype : {"fp32", "bf16"}) {
    CAPTURE(dtype);
    const AlignmentReport m = check_alignment(mixed(), device_aligned_to(dtype.c_str(), "8"), dtype, true, inputs);
    INFO(m.summary());
    REQUIRE(m.issues.size() == 4);
    CHECK(m.issues[0].timed_on == "64x60");  // a Linear's GEMM keeps its batch of 64
    for (int k : {1, 2}) {  // the convolution's in_channels 3 and out_channels 12: one timing, both sizes padded
      CHECK(m.issues[k].ms > 0);
      CHECK(m.issues[k].padded_ms > 0);
      CHECK(m.issues[k].timed_on == "2x3x16x16");
    }
    CHECK(m.issues[3].ms == 0);  // embeddings are not timed
    CHECK(m.not_timed.empty());
    CHECK(m.summary().find("conv (conv) in_channels 3 -> pad to 8 (measured on 2x3x16x16: ") != std::string::npos);
  }

  // A BatchNorm folded into the convolution by freezing: the folded weight is the one called.
  const std::vector<at::Tensor> image = {at::randn({2, 3, 32, 32})};
  const AlignmentReport cnn = check_alignment(accelkit::test::script_cnn(3), device_aligned_to("fp32", "8"), "fp32", true, image);
  INFO(cnn.summary());
  REQUIRE(cnn.issues.size() == 2);  // the first convolution's 3 input channels, the Linear's 10 outputs
  CHECK(cnn.issues[0].op == "conv");
  CHECK(cnn.issues[0].layer == "c1w");  // named before the folding: the folded weight is a new tensor
  CHECK(cnn.issues[0].timed_on == "2x3x32x32");
  CHECK(cnn.issues[0].ms > 0);
  CHECK(cnn.issues[1].timed_on == "64x2048");

  // Inputs the forward rejects: LibTorch's message, shortened, as std::invalid_argument.
  const std::vector<at::Tensor> wrong = {at::randn({2, 5, 32, 32})};
  CHECK_THROWS_WITH_AS(check_alignment(accelkit::test::script_cnn(3), device_aligned_to("fp32", "8"), "fp32", true, wrong),
                       doctest::Contains("rejected the example inputs"), std::invalid_argument);

  // Grouped convolutions are listed, not timed, and the report says so.
  torch::jit::Module grouped("Grouped");
  grouped.register_parameter("w", at::randn({6, 3, 3, 3}), false);
  grouped.define(R"(
def forward(self, x):
    return torch.conv2d(x, self.w, None, [1, 1], [0, 0], [1, 1], 2)
)");
  const AlignmentReport g = check_alignment(grouped, device_aligned_to("fp32", "4"), "fp32", true, {at::randn({1, 6, 8, 8})});
  INFO(g.summary());
  REQUIRE(g.issues.size() == 2);
  CHECK(g.issues[0].dim == "in_channels");
  CHECK(g.issues[0].size == 6);  // the total: 2 groups of 3
  CHECK(g.issues[0].ms == 0);
  REQUIRE(g.not_timed.size() == 1);
  CHECK(g.not_timed[0].find("grouped or transposed") != std::string::npos);

  // A depthwise convolution (one input channel per group) with 8 channels is aligned to 8.
  torch::jit::Module depthwise("Depthwise");
  depthwise.register_parameter("w", at::randn({8, 1, 3, 3}), false);
  depthwise.define(R"(
def forward(self, x):
    return torch.conv2d(x, self.w, None, [1, 1], [1, 1], [1, 1], 8)
)");
  const AlignmentReport d = check_alignment(depthwise, device_aligned_to("fp32", "8"), "fp32");
  INFO(d.summary());
  CHECK(d.layers == 1);
  CHECK(d.issues.empty());
}

TEST_CASE("check_alignment names a folded convolution inside a branch an attribute decides") {
  // As torchvision's MobileNetV2 blocks: `if self.use_res_connect: return x + self.conv(x)`,
  // a BatchNorm after the convolution. The unfrozen graph calls the convolution in both
  // branches; the frozen one keeps one, its weight a new tensor with the BatchNorm folded in.
  at::manual_seed(3);
  torch::jit::Module block("ConvBn");
  block.register_parameter("weight", at::randn({6, 6, 3, 3}), false);
  block.register_buffer("mean", at::randn({6}));
  block.register_buffer("var", at::rand({6}).add_(0.5));
  block.register_parameter("gamma", at::rand({6}).add_(0.5), false);
  block.register_parameter("beta", at::randn({6}), false);
  block.define(R"(
def forward(self, x):
    x = torch.conv2d(x, self.weight, None, [1, 1], [1, 1])
    return torch.batch_norm(x, self.gamma, self.beta, self.mean, self.var, False, 0.1, 1e-5, False)
)");
  torch::jit::Module m("Residual");
  m.register_module("conv", block);
  m.register_attribute("use_res", c10::BoolType::get(), true);
  m.define(R"(
def forward(self, x):
    if self.use_res:
        return x + self.conv.forward(x)
    return self.conv.forward(x)
)");
  const AlignmentReport r = check_alignment(m, device_aligned_to("fp32", "8"), "fp32");
  INFO(r.summary());
  REQUIRE(r.issues.size() == 2);
  CHECK(r.issues[0].layer == "conv");  // not "conv #1"
  CHECK(r.issues[1].layer == "conv");
}

TEST_CASE("Runtime::check_alignment: the CPU plugin's vector width, for the plan's dtype") {
  const auto rt = accelkit::test::start_cpu_runtime();
  const AlignmentReport r = accelkit::check_alignment(*rt, accelkit::test::script_linear_stack(100, 2, 1));
  INFO(r.summary());
  CHECK(r.dtype == to_string(rt->precision().dtype));
  CHECK(r.multiple >= 4);
  CHECK(r.layers == 2);
  CHECK(r.issues.size() == (100 % r.multiple ? 4u : 0u));  // in and out of both layers
  const AlignmentReport aligned = accelkit::check_alignment(*rt, accelkit::test::script_linear_stack(128, 2, 1));
  CHECK(aligned.issues.empty());
}

}  // namespace alignment_suite
