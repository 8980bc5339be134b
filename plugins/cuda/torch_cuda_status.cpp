#include "torch_cuda_status.hpp"

#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>

#ifdef ACCELKIT_CUDA_TORCH_GLUE
#include "accelkit/sdk/torch_compat.hpp"
#include "fused_adamw_launch.hpp"
#endif

namespace accelkit::cuda {

TorchCudaStatus torch_cuda_status() {
  TorchCudaStatus s;
  s.torch_major = TORCH_VERSION_MAJOR;
  s.torch_minor = TORCH_VERSION_MINOR;
  const auto& hooks = at::detail::getCUDAHooks();
  // hasCUDART() is true only for the real hooks of a CUDA build; it starts nothing.
  s.has_cuda = hooks.hasCUDART() && !hooks.hasROCM();
  if (s.has_cuda) s.runtime_version = static_cast<int>(hooks.versionCUDART());
#ifdef ACCELKIT_CUDA_TORCH_GLUE
  std::size_t n = 0;
  const int* archs = fused_adamw_archs(&n);
  s.kernel_archs.assign(archs, archs + n);
  s.fused_adamw = s.has_cuda;
  s.graph_capture = s.has_cuda;
  s.fused_sgd = s.has_cuda && compat::aten_fused_sgd_available(c10::DeviceType::CUDA);
#endif
#ifdef ACCELKIT_CUDA_NCCL
  s.nccl = s.has_cuda;
#endif
  return s;
}

}  // namespace accelkit::cuda
