// What LibTorch in this process can do with CUDA, read without creating a CUDA context:
// whether its CUDA hooks are loaded (a CPU-only LibTorch has none), its CUDA runtime version,
// and which of this plugin's CUDA parts were built.
#pragma once

#include "cuda_report.hpp"

namespace accelkit::cuda {

TorchCudaStatus torch_cuda_status();

}  // namespace accelkit::cuda
