// NCCL process groups for data-parallel runs on CUDA (Device::process_group): c10d's
// ProcessGroupNCCL, which lives in a CUDA LibTorch's libtorch_cuda. Built only where that
// LibTorch was built with NCCL and NCCL's header is found (ACCELKIT_CUDA_NCCL).
#pragma once

#include <memory>

#include <accelkit/sdk/collectives.hpp>
#include <accelkit/sdk/status.hpp>

namespace accelkit::cuda {

// The group for `request` on GPU `ordinal` (this rank's): NCCL's communicators are made at
// the first collective, on the tensors' device, and every collective is bounded by
// request.timeout (c10d's watchdog ends the process past it, as PyTorch's own runs do).
Result<std::shared_ptr<c10d::ProcessGroup>> make_nccl_group(const CollectiveRequest& request, int ordinal);

}  // namespace accelkit::cuda
