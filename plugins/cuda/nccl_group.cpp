#include "nccl_group.hpp"

#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <accelkit/sdk/support/process_group.hpp>
#include <accelkit/sdk/torch_compat_pg.hpp>

namespace accelkit::cuda {

Result<std::shared_ptr<c10d::ProcessGroup>> make_nccl_group(const CollectiveRequest& request, int ordinal) {
  if (!request.store) return Status(StatusCode::invalid_argument, "no rendezvous store for the NCCL group");
  // The communicators come up on the current device at the first collective: this rank's GPU.
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(ordinal));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = request.timeout;
  const c10::intrusive_ptr<c10d::Store> store = support::retain(request.store);
  auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, request.rank, request.world_size, options);
  return support::share_group(compat::as_process_group(store, request.rank, request.world_size, request.timeout,
                                                       std::move(nccl), c10::DeviceType::CUDA, "nccl"));
}

}  // namespace accelkit::cuda
