// Mixed-precision master weights for a fused AdamW (AdamWConfig::master_weights), written once
// for every plugin's optimizer: which params get a master, the conversion of the model's
// weights to bfloat16, the fp32 copies themselves, and their place in a checkpoint.
//
// adopt(): every float matrix param (2 or more dimensions: linear, convolution and embedding
// weights) is converted to bfloat16 in place (set_data, as Module::to does; a grad it already
// has is converted too) and its fp32 values become the master, without copying when the
// layout allows. Vectors (biases, norm scales) stay float with the plain update: a tiny share
// of the bytes, and norms run in fp32. A bfloat16 param (given, or added later through
// master()) gets its master from its own value.
//
// save()/load(): the masters sit next to AdamW's state under kArchiveKey, by parameter
// position; a checkpoint without them (a torch::optim::AdamW one) restarts them from the
// bfloat16 params with a warning.
//
// Header-only; call under the optimizer's NoGradGuard (adopt() takes its own).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>
#include <torch/utils.h>

#include "accelkit/sdk/support/adamw_state.hpp"

namespace accelkit::support {

class MasterWeights {
 public:
  static constexpr const char* kArchiveKey = "accelkit_master_weights";

  // Converts the groups' float matrix params to bfloat16 and keeps their fp32 values.
  // `who` names the optimizer in errors; `device_ok` says whether a param's device is one the
  // optimizer's kernel runs on (`where` names them in the error).
  template <typename DeviceOk>
  void adopt(std::vector<torch::optim::OptimizerParamGroup>& groups, const char* who, DeviceOk device_ok,
             const char* where) {
    torch::NoGradGuard no_grad;
    for (auto& group : groups) {
      for (auto& p : group.params()) {
        const auto dtype = p.scalar_type();
        if ((dtype != at::kFloat && dtype != at::kBFloat16) || masters_.count(p.unsafeGetTensorImpl())) continue;
        if (dtype == at::kFloat && p.dim() < 2) continue;  // vectors stay fp32
        TORCH_CHECK(device_ok(p), who, ": parameters must be ", where, ", got one on ", p.device());
        at::Tensor low = p.detach().to(at::kBFloat16);  // the param's layout where it is dense
        // A float param's own storage becomes the master when its layout matches: nothing copied.
        at::Tensor master = with_layout(dtype == at::kFloat ? p.detach() : low.to(at::kFloat), low);
        if (dtype == at::kFloat) {
          if (p.grad().defined()) p.mutable_grad() = p.grad().to(at::kBFloat16);
          p.set_data(low);
        }
        masters_.emplace(p.unsafeGetTensorImpl(), std::move(master));
      }
    }
  }

  // The fp32 master of a bfloat16 param (undefined when it has none).
  at::Tensor of(const at::Tensor& param) const {
    auto it = masters_.find(param.unsafeGetTensorImpl());
    return it == masters_.end() ? at::Tensor() : it->second;
  }

  // The master of bfloat16 param `p` in the kernel's work layout `work`, made from p's value
  // the first time (a param added after construction), ready for the kernel to update.
  at::Tensor& for_step(const at::Tensor& p, const at::Tensor& work, const char* who) {
    auto m = masters_.find(p.unsafeGetTensorImpl());
    if (m == masters_.end()) m = masters_.emplace(p.unsafeGetTensorImpl(), p.detach().to(at::kFloat)).first;
    settle_state(m->second, p, work, who, "master weight");
    return m->second;
  }

  bool empty() const { return masters_.empty(); }

  void save(const std::vector<torch::optim::OptimizerParamGroup>& groups,
            torch::serialize::OutputArchive& archive) const {
    if (masters_.empty()) return;
    torch::serialize::OutputArchive masters(archive.compilation_unit());
    std::int64_t index = 0;
    for (const auto& group : groups)
      for (const auto& p : group.params()) {
        auto it = masters_.find(p.unsafeGetTensorImpl());
        if (it != masters_.end()) masters.write(std::to_string(index), it->second, /*is_buffer=*/true);
        ++index;
      }
    archive.write(kArchiveKey, masters);
  }

  void load(std::vector<torch::optim::OptimizerParamGroup>& groups, torch::serialize::InputArchive& archive,
            const char* who) {
    torch::NoGradGuard no_grad;
    torch::serialize::InputArchive masters;
    const bool has_masters = archive.try_read(kArchiveKey, masters);
    std::int64_t index = 0, restarted = 0;
    for (auto& group : groups)
      for (auto& p : group.params()) {
        const std::string key = std::to_string(index++);
        if (p.scalar_type() != at::kBFloat16) continue;
        at::Tensor m;
        if (has_masters && masters.try_read(key, m, /*is_buffer=*/true)) {
          TORCH_CHECK(m.sizes() == p.sizes(), who, ": the checkpoint's master weight ", key, " has shape ", m.sizes(),
                      " but its parameter has ", p.sizes());
          m = m.to(p.device(), at::kFloat);
        } else {
          m = p.detach().to(at::kFloat);
          ++restarted;
        }
        masters_[p.unsafeGetTensorImpl()] = std::move(m);
      }
    if (restarted > 0)
      TORCH_WARN(who, ": the checkpoint holds no fp32 master weights for ", restarted, " bf16 parameter(s) "
                 "(saved by an optimizer without master weights?); they restart from the bf16 values");
  }

 private:
  std::unordered_map<const c10::TensorImpl*, at::Tensor> masters_;
};

}  // namespace accelkit::support
