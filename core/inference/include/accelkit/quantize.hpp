// INT8 for the user's TorchScript model's Linear layers, through the quantized engine LibTorch
// already has (x86 / FBGEMM / oneDNN on the CPU), the engine chosen by the device's plugin
// (Capability::int8_linear, free key "int8.engine"):
//
//   auto q = accelkit::quantize(*rt, module, {.linear = accelkit::QuantDtype::int8}, {example_x});
//   at::Tensor y = q.module.forward({x}).toTensor();     // fp32 in, fp32 out
//   std::cout << q.report.summary();                    // layers, sizes, the error on example_x
//
// Dynamic quantization: each Linear's weight is quantized once (symmetric, one scale per
// output channel, qint8) and packed by the engine (quantized::linear_prepack); at run time
// quantized::linear_dynamic quantizes the activations per call from their own range, runs
// the int8 GEMM with int32 accumulation and returns fp32. The module is frozen first
// (torch::jit::freeze), so only weights that are constants of the model are converted; the
// rest of the model runs as it did. The result is lossy: the report gives the error on the
// example inputs, and nothing here decides for the user whether it is acceptable.
//
// Static quantization (`.conv = QuantDtype::int8`), for convolutional networks, whose time is
// in the convolutions that dynamic quantization cannot reach:
//
//   auto q = accelkit::quantize(*rt, module, {.conv = accelkit::QuantDtype::int8}, {calibration_batch});
//
// LibTorch's own graph-mode quantization passes, the ones torch.ao.quantization.quantize_jit
// runs: BatchNorm folded into its convolution, observers inserted on the weights and on every
// activation a quantized op reads or writes, one forward on the example inputs to calibrate
// them (min/max; activations quint8 with one scale each, weights qint8 symmetric per output
// channel), then quantize/dequantize inserted and fused into the engine's ops
// (quantized::conv2d_relu, quantized::add_relu, quantized::linear, ...) with the weights
// packed once, and the module frozen. Convolutions, Linear layers and the additions and
// poolings between them then run in int8, fp32 in and out. The activations' ranges are the
// example inputs': give a batch that looks like the data the model will see.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>

namespace accelkit {

class Runtime;

enum class QuantDtype { none, int8 };

struct QuantizeOptions {
  QuantDtype linear = QuantDtype::int8;
  // int8: static quantization of the convolutions with the Linear layers (above); needs
  // example inputs to calibrate on, and linear = int8 (the passes convert both).
  QuantDtype conv = QuantDtype::none;
  // Dynamic scheme: Linear layers with fewer input features than this stay fp32 (quantizing
  // the activations of a tiny GEMM costs more than the GEMM). The static scheme's activations
  // are already int8 and it converts every Linear layer.
  std::int64_t min_in_features = 16;
};

struct QuantizedLayer {
  std::string name;           // the parameter it came from ("fc1"), or "linear #k" / "conv #k"
  std::string kind = "linear";  // "linear" | "conv"
  std::int64_t in_features = 0;   // a convolution's input channels
  std::int64_t out_features = 0;  // a convolution's output channels
  bool converted = false;
  std::string why;            // why not, when not converted
};

struct QuantizeReport {
  std::string engine;         // LibTorch's quantized engine: "x86", "fbgemm", "onednn"
  bool reduce_range = false;  // activations quantized to 7 bits (the plugin's choice)
  std::string scheme;         // what was done, in words
  std::vector<QuantizedLayer> layers;
  int converted = 0;
  int skipped = 0;
  std::int64_t bytes_before = 0;  // the frozen module's constant tensors, as fp32
  std::int64_t bytes_after = 0;   // the same with int8 weights and their scales
  // On the example inputs, against the module's own fp32 outputs (none without inputs):
  std::optional<double> rel_error;      // ||y - ref|| / ||ref|| over every output
  std::optional<double> max_rel_error;  // max |y - ref| / max |ref|
  std::optional<double> cosine;         // cosine similarity with ref
  std::vector<std::string> notes;       // what LibTorch warned while converting ("LibTorch: ..."), and what the
                                        // static scheme changed or could not calibrate
  std::string summary() const;          // a few lines for people
};

struct QuantizedModule {
  torch::jit::Module module;  // frozen; runs in eval mode without autograd
  QuantizeReport report;
};

// The module's Linear layers in INT8, on the quantized engine `rt`'s device's plugin names
// (Capability::int8_linear; std::invalid_argument where it has none). A frozen copy is
// returned with a report: layers converted and kept (why), sizes, and - given example inputs -
// the output error against the module's own fp32 outputs. Lossy by design: the report says
// how much; nothing is chosen for the caller.
QuantizedModule quantize(const Runtime& rt, const torch::jit::Module& module, const QuantizeOptions& options = {},
                         const std::vector<at::Tensor>& example_inputs = {});

}  // namespace accelkit
