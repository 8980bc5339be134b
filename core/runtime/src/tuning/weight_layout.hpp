// The layout of a model's convolution weights, which step tuning may switch between training
// steps: as the program made them (contiguous), or channels-last. A convolution whose weight is
// channels-last runs channels-last whatever its input's layout (oneDNN on the CPU, cuDNN on
// NVIDIA GPUs), and so do the layers after it; whether that is faster depends on the network
// (on a 2-core Zen 4: ResNet-20 13-20% faster a step, pytorch/examples' DCGAN 4-7% slower), so
// it is measured on the program's own steps, never assumed.
//
// Only the 4-D weights of torch::nn::Conv2d and ConvTranspose2d modules are switched, with
// their gradients where they have one; values never change, only strides. The optimizer's
// state follows: accelkit's fused updates keep each state tensor in its parameter's layout,
// and torch::optim's own updates are elementwise, right in any layout.
#pragma once

#include <cstddef>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}

namespace accelkit::detail {

class WeightLayout {
 public:
  // The convolution weights of `module` and of every module under it, added to those it has
  // (a GAN's two models).
  void add(torch::nn::Module& module);
  std::size_t weights() const noexcept { return weights_.size(); }
  // Every weight (and its gradient) channels-last, or contiguous; a no-op where it is already.
  void apply(bool channels_last);

 private:
  std::vector<at::Tensor> weights_;  // the parameters themselves (same TensorImpl as the module's)
};

}  // namespace accelkit::detail
