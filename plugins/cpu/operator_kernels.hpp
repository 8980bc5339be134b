// The CPU plugin's own ATen operator kernels (sdk precision.hpp, OperatorKernel): what the plan
// may list, and how many calls each has run itself (read back by CpuPrecision::read_back).
#pragma once

#include <accelkit/sdk/precision.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "conv_choice.hpp"
#include "isa.hpp"

namespace accelkit::cpu {

// The kernels this CPU can run (AVX2 for max_pool2d_with_indices and its backward); empty where it has none.
std::vector<OperatorKernel> operator_kernels(const IsaFlags& isa);

// The plan's kernels for `request` on this CPU, with one reason line. Toggle::on where the CPU
// has none is refused (not_supported), never a silent "off".
Result<std::vector<std::string>> plan_operator_kernels(Toggle request, const IsaFlags& isa, std::string& reason);

// Calls of `op` that ran the plugin's kernel (not LibTorch's) in this process.
std::uint64_t operator_kernel_calls(const std::string& op) noexcept;

// The convolution shapes timed in this process (operator_kernels.cpp, conv_choice.hpp): how many
// kept the GEMM path, how many LibTorch's kernel, how many are still being timed.
conv_choice::Table::Counts convolution_shapes() noexcept;

}  // namespace accelkit::cpu
