// What quantize's two schemes share (quantize.cpp: dynamic INT8 Linear;
// quantize_static.cpp: static INT8 through LibTorch's graph-mode quantization passes): the
// engine the device's plugin names, a scope that sets it, and the byte count of a graph's
// constant tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/QEngine.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include "accelkit/quantize.hpp"
#include "accelkit/sdk/device.hpp"

namespace accelkit::quant {

// The plugin's int8 choice (Capability::int8_linear and its free keys), checked against this
// LibTorch; std::invalid_argument with the reason where there is none.
struct Engine {
  std::string name;  // "x86", "fbgemm", "onednn"
  at::QEngine engine = at::QEngine::NoQEngine;
  bool reduce_range = false;
};
Engine engine_of(const DeviceInfo& info);

// Sets the process's quantized engine for a scope (prepacking reads it), then restores it.
class EngineScope {
 public:
  explicit EngineScope(at::QEngine e) : previous_(at::globalContext().qEngine()) { at::globalContext().setQEngine(e); }
  ~EngineScope() { at::globalContext().setQEngine(previous_); }
  EngineScope(const EngineScope&) = delete;
  EngineScope& operator=(const EngineScope&) = delete;

 private:
  at::QEngine previous_;
};

// The bytes of the tensors that are constants of `block` and the blocks inside it.
std::int64_t constant_bytes(torch::jit::Block* block);

// The report's error fields: the quantized module's outputs `got` against the fp32 `ref`.
void set_error(QuantizeReport& r, const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& ref);

// Static INT8 (QuantizeOptions::conv = int8): `module` on the CPU, calibrated on
// `example_inputs` (one batch: the forward's arguments).
QuantizedModule quantize_static(const torch::jit::Module& module, const Engine& engine,
                                const std::vector<at::Tensor>& example_inputs);

}  // namespace accelkit::quant
