// The bench's reference models (internal to bench*.cpp): shapes, construction from a seed,
// forward, and their matmul FLOPs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace torch::nn { class Module; }

namespace accelkit::bench_detail {

struct ModelSpec {
  std::string model;  // mlp | transformer | cnn | optimizer
  int batch = 0;
  int width = 0;      // mlp D, transformer d_model, cnn image side (28), optimizer tensor side
  int layers = 0;     // mlp Linear layers, transformer encoder layers, optimizer tensors
  int heads = 0;      // transformer
  int seq = 0;        // transformer T
};

// Defaults for a CPU or a GPU, with the user's batch/width where given (0 = default).
ModelSpec make_spec(const std::string& model, int batch, int width, bool gpu);
std::string describe(const ModelSpec& spec);  // "3 x Linear(2048) + ReLU, batch 256"

// Matmul FLOPs of one training step (forward + input and weight gradients, without the input
// gradient of a first layer whose input needs none); 0 for optimizer.
double training_matmul_flops(const ModelSpec& spec);

// A trainable model. The same seed gives the same weights, on any device it is moved to.
struct Net {
  std::shared_ptr<torch::nn::Module> module;
  std::function<at::Tensor(const at::Tensor&)> forward;
};
Net make_net(const ModelSpec& spec, std::uint64_t seed);

// Input batch for the spec on `device` (random, from the current generator state).
at::Tensor make_input(const ModelSpec& spec, c10::Device device);

// The optimizer model's parameters: `layers` fp32 tensors [width, width] with fixed random
// gradients, on `device`.
std::vector<at::Tensor> make_optimizer_params(const ModelSpec& spec, std::uint64_t seed, c10::Device device);

}  // namespace accelkit::bench_detail
