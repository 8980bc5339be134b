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

#include <c10/core/ScalarType.h>

namespace torch::nn { class Module; }
namespace torch::jit { struct Module; }

namespace accelkit::bench_detail {

// One input of a user's model, as --input gives it: "32x3x224x224[,dtype]".
struct InputSpec {
  std::vector<std::int64_t> shape;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::string text;  // as given
};
// Throws std::invalid_argument naming the text and what is allowed.
InputSpec parse_input(const std::string& text);
// A random tensor for `in` on `device`, from the current generator: floating types standard
// normal, integer types uniform in [0, 16) (indices a small embedding table takes), bool 0/1.
at::Tensor make_tensor(const InputSpec& in, c10::Device device);

// Whether `model` names one of the built-in models (else it is a path to a user's model file).
bool is_builtin_model(const std::string& model);

struct ModelSpec {
  std::string model;  // mlp | transformer | cnn | optimizer | file
  std::string file;   // model "file": the TorchScript file
  std::vector<InputSpec> inputs;  // model "file": its inputs
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

// A trainable model. The same seed gives the same weights, on any device it is moved to (a
// model file: its own weights, loaded anew for each Net).
struct Net {
  std::shared_ptr<torch::nn::Module> module;   // a built-in model
  std::shared_ptr<torch::jit::Module> script;  // a user's TorchScript model
  // The first input in, the first output tensor out; a model file's other inputs are fixed.
  std::function<at::Tensor(const at::Tensor&)> forward;
  std::vector<at::Tensor> parameters() const;
  void to(c10::Device device) const;
};
Net make_net(const ModelSpec& spec, std::uint64_t seed);

// Input batch for the spec on `device` (random, from the current generator state).
at::Tensor make_input(const ModelSpec& spec, c10::Device device);

// The optimizer model's parameters: `layers` fp32 tensors [width, width] with fixed random
// gradients, on `device`.
std::vector<at::Tensor> make_optimizer_params(const ModelSpec& spec, std::uint64_t seed, c10::Device device);

}  // namespace accelkit::bench_detail
