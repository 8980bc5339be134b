// A stand-in for LibTorch's distributed-autograd context header, used only where a LibTorch
// ships c10d's reducer.hpp without it (Debian's 1.13): reducer.hpp names the context type's
// callback signature and holds a shared pointer to one, nothing more. accelkit never creates
// a distributed-autograd context; LibTorch's own definitions are the ones that run.
#pragma once

#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>

namespace torch::distributed::autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};
using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace torch::distributed::autograd
