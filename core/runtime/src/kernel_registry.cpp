#include "kernel_registry.hpp"

#include <algorithm>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <torch/library.h>

#include "accelkit/sdk/torch_compat.hpp"

namespace accelkit::detail {

namespace {
thread_local bool kernels_open = false;
}  // namespace

bool operator_kernels_open() noexcept { return kernels_open; }
void set_operator_kernels_open(bool open) noexcept { kernels_open = open; }

struct RegisteredKernels::Libraries {
  std::vector<std::unique_ptr<torch::Library>> all;
};

RegisteredKernels::RegisteredKernels() : libraries_(std::make_unique<Libraries>()) {}
RegisteredKernels::~RegisteredKernels() = default;

void RegisteredKernels::add(const std::vector<std::string>& ops, const std::vector<OperatorKernel>& offered,
                            c10::DispatchKey key, const std::string& who) {
  for (const std::string& op : ops) {
    if (std::find(ops_.begin(), ops_.end(), op) != ops_.end()) continue;
    auto k = std::find_if(offered.begin(), offered.end(), [&](const OperatorKernel& o) { return o.op == op; });
    if (k == offered.end() || !k->register_impl)
      throw std::runtime_error(who + ": the precision plan lists the operator kernel '" + op +
                               "', which Precision::kernels() does not offer");
    auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
    compat::WarningCollector warnings;  // "Overriding a previously registered kernel ...": the point
    try {
      k->register_impl(*library, &operator_kernels_open);
    } catch (const std::exception& e) {
      throw std::runtime_error(who + ": registering its kernel for aten::" + op + " failed: " + e.what());
    }
    for (const auto& w : warnings.messages()) spdlog::debug("operator kernel aten::{} from {}: {}", op, who, w);
    libraries_->all.push_back(std::move(library));
    ops_.push_back(op);
    registered_.push_back(op + ": " + k->what);
    spdlog::info("operator kernel: aten::{} at {} from the {} plugin ({})", op, c10::toString(key), who, k->what);
  }
}

}  // namespace accelkit::detail
