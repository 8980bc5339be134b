// The plugin's operator kernels (sdk precision.hpp, OperatorKernel) on the host side: their
// registration with LibTorch's dispatcher, and the gate each of them reads on every call - open
// on a thread whose applied plan (Runtime::apply_precision) or training step's configuration
// (step tuning) runs them, shut everywhere else, so plain LibTorch in the same process stays
// plain LibTorch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <c10/core/DispatchKey.h>

#include "accelkit/sdk/precision.hpp"

namespace accelkit::detail {

// The gate passed to every kernel: this thread's state.
bool operator_kernels_open() noexcept;
void set_operator_kernels_open(bool open) noexcept;

// Kernels registered at one dispatch key; destroying it takes them out of the dispatcher (the
// owner destroys it before the plugin that holds their code unloads).
class RegisteredKernels {
 public:
  RegisteredKernels();
  ~RegisteredKernels();
  RegisteredKernels(const RegisteredKernels&) = delete;
  RegisteredKernels& operator=(const RegisteredKernels&) = delete;

  // Registers those of `offered` that `ops` names and are not registered yet, at `key`, from
  // plugin `who`. Throws std::runtime_error naming an op the plan lists but `offered` lacks,
  // or a registration LibTorch refused. What LibTorch warns (it replaces its own kernel) is
  // logged at debug level, not printed.
  void add(const std::vector<std::string>& ops, const std::vector<OperatorKernel>& offered, c10::DispatchKey key,
           const std::string& who);
  // "op: what" per registered kernel.
  const std::vector<std::string>& registered() const noexcept { return registered_; }

 private:
  struct Libraries;
  std::unique_ptr<Libraries> libraries_;
  std::vector<std::string> registered_;
  std::vector<std::string> ops_;
};

}  // namespace accelkit::detail
