// Small TorchScript modules made in C++ (torch::jit::Module::define) for the suites that take a
// user's model: a Linear stack, a small CNN, and a module with two inputs. Each is built from a
// seed, so the same seed gives the same weights.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>

namespace accelkit::test {

// `layers` x (Linear(width, width) + ReLU): the dense layers of aten::linear a scripted
// torch.nn.Linear compiles to.
inline torch::jit::Module script_linear_stack(int width, int layers, std::uint64_t seed) {
  at::manual_seed(seed);
  torch::jit::Module m("LinearStack");
  std::string body = "def forward(self, x):\n";
  const double bound = 1.0 / std::sqrt(static_cast<double>(width));
  for (int i = 0; i < layers; ++i) {
    const std::string n = std::to_string(i);
    m.register_parameter("w" + n, at::rand({width, width}).mul_(2 * bound).sub_(bound), false);
    m.register_parameter("b" + n, at::rand({width}).mul_(2 * bound).sub_(bound), false);
    body += "    x = torch.relu(torch.linear(x, self.w" + n + ", self.b" + n + "))\n";
  }
  body += "    return x\n";
  m.define(body);
  return m;
}

// Conv(3->16, 3x3) + BatchNorm + ReLU + MaxPool, Conv(16->32) + ReLU + MaxPool, Linear to 10:
// images [N, 3, 32, 32].
inline torch::jit::Module script_cnn(std::uint64_t seed) {
  at::manual_seed(seed);
  torch::jit::Module m("SmallCnn");
  m.register_parameter("c1w", at::randn({16, 3, 3, 3}).mul_(0.2), false);
  m.register_parameter("c1b", at::randn({16}).mul_(0.1), false);
  m.register_buffer("bn_mean", at::randn({16}).mul_(0.1));
  m.register_buffer("bn_var", at::rand({16}).add_(0.5));
  m.register_parameter("bn_w", at::rand({16}).add_(0.5), false);
  m.register_parameter("bn_b", at::randn({16}).mul_(0.1), false);
  m.register_parameter("c2w", at::randn({32, 16, 3, 3}).mul_(0.08), false);
  m.register_parameter("c2b", at::randn({32}).mul_(0.1), false);
  m.register_parameter("fw", at::randn({10, 32 * 8 * 8}).mul_(0.02), false);
  m.register_parameter("fb", at::randn({10}).mul_(0.1), false);
  m.define(R"(
def forward(self, x):
    x = torch.conv2d(x, self.c1w, self.c1b, [1, 1], [1, 1])
    x = torch.batch_norm(x, self.bn_w, self.bn_b, self.bn_mean, self.bn_var, False, 0.1, 1e-5, False)
    x = torch.max_pool2d(torch.relu(x), [2, 2])
    x = torch.conv2d(x, self.c2w, self.c2b, [1, 1], [1, 1])
    x = torch.max_pool2d(torch.relu(x), [2, 2])
    return torch.linear(torch.flatten(x, 1), self.fw, self.fb)
)");
  return m;
}

// Conv(3->16, 3x3) + BatchNorm in training mode (batch statistics, running ones updated) + ReLU,
// twice, then the channels' means and a Linear to 10: images [N, 3, 16, 16]. A network trained
// as torchvision's are, its BatchNorm in train().
inline torch::jit::Module script_bn_cnn(std::uint64_t seed) {
  at::manual_seed(seed);
  torch::jit::Module m("BnCnn");
  m.register_parameter("c1w", at::randn({16, 3, 3, 3}).mul_(0.2), false);
  m.register_parameter("c2w", at::randn({16, 16, 3, 3}).mul_(0.1), false);
  for (const char* n : {"1", "2"}) {
    m.register_buffer(std::string("m") + n, at::zeros({16}));
    m.register_buffer(std::string("v") + n, at::ones({16}));
    m.register_parameter(std::string("g") + n, at::rand({16}).add_(0.5), false);
    m.register_parameter(std::string("b") + n, at::randn({16}).mul_(0.1), false);
  }
  m.register_parameter("fw", at::randn({10, 16}).mul_(0.2), false);
  m.register_parameter("fb", at::randn({10}).mul_(0.1), false);
  m.define(R"(
def forward(self, x):
    x = torch.conv2d(x, self.c1w, None, [1, 1], [1, 1])
    x = torch.relu(torch.batch_norm(x, self.g1, self.b1, self.m1, self.v1, True, 0.1, 1e-5, False))
    x = torch.conv2d(x, self.c2w, None, [1, 1], [1, 1])
    x = torch.relu(torch.batch_norm(x, self.g2, self.b2, self.m2, self.v2, True, 0.1, 1e-5, False))
    return torch.linear(x.mean([2, 3]), self.fw, self.fb)
)");
  return m;
}

// An MLP with dropout at p = 0.5 after each hidden layer (training mode): its training steps draw
// random numbers.
inline torch::jit::Module script_dropout_mlp(std::uint64_t seed) {
  at::manual_seed(seed);
  torch::jit::Module m("DropoutMlp");
  m.register_parameter("w1", at::randn({64, 32}).mul_(0.2), false);
  m.register_parameter("b1", at::randn({64}).mul_(0.1), false);
  m.register_parameter("w2", at::randn({10, 64}).mul_(0.2), false);
  m.register_parameter("b2", at::randn({10}).mul_(0.1), false);
  m.define(R"(
def forward(self, x):
    x = torch.dropout(torch.relu(torch.linear(x, self.w1, self.b1)), 0.5, True)
    return torch.linear(x, self.w2, self.b2)
)");
  return m;
}

// Two inputs, two outputs: (relu(x W1^T + b1) + y W2^T, y.sum(1)).
inline torch::jit::Module script_two_inputs(std::uint64_t seed) {
  at::manual_seed(seed);
  torch::jit::Module m("TwoInputs");
  m.register_parameter("w1", at::randn({32, 24}).mul_(0.2), false);
  m.register_parameter("b1", at::randn({32}).mul_(0.1), false);
  m.register_parameter("w2", at::randn({32, 16}).mul_(0.2), false);
  m.define(R"(
def forward(self, x, y):
    h = torch.relu(torch.linear(x, self.w1, self.b1)) + torch.matmul(y, self.w2.t())
    return h, y.sum(1)
)");
  return m;
}

// pytorch/examples' MNIST network in eval, its layers as attributes (conv1, conv2, fc1, fc2)
// and its `x.view(-1, 320)`: images [N, 1, 28, 28].
inline torch::jit::Module script_mnist(std::uint64_t seed) {
  at::manual_seed(seed);
  torch::jit::Module m("MnistNet");
  auto layer = [&](const char* name, std::vector<std::int64_t> shape, double scale) {
    torch::jit::Module l(std::string("Layer_") + name);
    l.register_parameter("weight", at::randn(shape).mul_(scale), false);
    l.register_parameter("bias", at::randn({shape[0]}).mul_(0.1), false);
    m.register_module(name, l);
  };
  layer("conv1", {10, 1, 5, 5}, 0.3);
  layer("conv2", {20, 10, 5, 5}, 0.08);
  layer("fc1", {50, 320}, 0.06);
  layer("fc2", {10, 50}, 0.15);
  m.define(R"(
def forward(self, x):
    x = torch.relu(torch.max_pool2d(torch.conv2d(x, self.conv1.weight, self.conv1.bias), [2, 2]))
    x = torch.relu(torch.max_pool2d(torch.conv2d(x, self.conv2.weight, self.conv2.bias), [2, 2]))
    x = x.view(-1, 320)
    x = torch.relu(torch.linear(x, self.fc1.weight, self.fc1.bias))
    return torch.log_softmax(torch.linear(x, self.fc2.weight, self.fc2.bias), 1)
)");
  return m;
}

}  // namespace accelkit::test
