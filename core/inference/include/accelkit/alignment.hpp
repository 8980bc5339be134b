// Dimension alignment: the Linear, convolution and embedding sizes of a TorchScript model that
// are not multiples of what the device's fast paths work in (8 for fp16/bf16 tensor cores, 16
// for int8, the vector width in elements on a CPU), each with the size to pad to. The
// multiple is the device plugin's statement: the free key "align.<dtype>" (capability.hpp).
//
//   auto report = accelkit::check_alignment(*rt, accelkit::load_torchscript("model.pt"));
//   std::cout << report.summary();
//
// Sizes are read from the frozen graph: aten::linear weights [out, in], convolution weights
// [out, in / groups, ...] and embedding tables [rows, dim] that are constants of the model. A
// grouped convolution's channels are checked as totals (in = groups x in / groups): a
// depthwise convolution has one input channel per group, which no padding changes.
// A padded size costs more FLOPs and may still run faster; measure before changing a model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>

#include "accelkit/sdk/device.hpp"

namespace accelkit {

class Runtime;

struct AlignmentIssue {
  std::string layer;      // the parameter's module ("fc1"), or "<op> #k"
  std::string op;         // "linear" | "conv" | "embedding"
  std::string dim;        // "in_features", "out_features", "in_channels", "out_channels", "embedding_dim"
  std::int64_t size = 0;
  std::int64_t padded = 0;  // the next multiple
  // With `measure`: the layer's op in the dtype, as it is and with its sizes padded, medians in
  // ms; 0 when not measured. A Linear's GEMM at a batch of 64; a convolution on the input shape
  // it saw in a forward of the example inputs.
  double ms = 0;
  double padded_ms = 0;
  std::string timed_on;  // the input shape timed ("64x60", "16x3x224x224"); empty when not timed
};

struct AlignmentReport {
  std::string device;      // "cpu:0"
  std::string dtype;       // what the multiple is for ("bf16")
  std::int64_t multiple = 0;  // 0 = the plugin states none for this dtype (nothing checked)
  int layers = 0;          // layers looked at
  std::vector<AlignmentIssue> issues;
  std::vector<std::string> not_timed;  // with `measure`: what was left untimed, and why
  std::string summary() const;
};

// `dtype`: "fp32", "bf16", "fp16", "int8" (the compute dtype the model will run in). With
// `measure`, each misaligned Linear's GEMM is timed on the CPU as it is and padded (fp32 or
// bf16; other dtypes are not timed). A convolution's cost depends on the image it is given:
// with `example_inputs` (one per argument of forward) the model runs once on them, and each
// misaligned convolution (ungrouped, not transposed) is timed on the input shape it saw there,
// its channels as they are and padded. Throws std::invalid_argument with LibTorch's message
// when the forward rejects the inputs.
AlignmentReport check_alignment(const torch::jit::Module& module, const DeviceInfo& device, const std::string& dtype,
                                bool measure = false, const std::vector<at::Tensor>& example_inputs = {});

// The same for `rt`'s device, for `dtype` ("" = the plan's dtype); `measure` applies on the CPU.
AlignmentReport check_alignment(const Runtime& rt, const torch::jit::Module& module, const std::string& dtype = "",
                                bool measure = false, const std::vector<at::Tensor>& example_inputs = {});

}  // namespace accelkit
