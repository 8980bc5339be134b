// AOTInductor model packages (.pt2, made by torch._inductor.aoti_compile_and_package), loaded
// through LibTorch's torch::inductor::AOTIModelPackageLoader: from LibTorch 2.6 (the loader
// appeared in 2.5, the packaging API settled in 2.6). Apart from torch_compat.hpp because its
// headers are only needed by the code that loads packages.
//
// AotiPackage::available is false before 2.6, and where a LibTorch lacks the loader's header;
// constructing one there throws c10::Error with "needs LibTorch >= 2.6". The loader takes a
// device index from 2.8 (checked in 2.13; 2.6 takes (path, model name[, single-threaded]));
// before that the package runs on the current device of its type.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "accelkit/sdk/torch_compat.hpp"

#if ACCELKIT_TORCH_AT_LEAST(2, 6) && __has_include(<torch/csrc/inductor/aoti_package/model_package_loader.h>)
#define ACCELKIT_HAS_AOTI_PACKAGE 1
#else
#define ACCELKIT_HAS_AOTI_PACKAGE 0
#endif

#if ACCELKIT_HAS_AOTI_PACKAGE
#include <memory>

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#endif

namespace accelkit::compat {

class AotiPackage {
 public:
  static constexpr bool available = ACCELKIT_HAS_AOTI_PACKAGE;

  // Loads model `model_name` of the package onto device index `device_index` of the package's
  // own device type (-1: the current one). Throws c10::Error.
  AotiPackage(const std::string& path, const std::string& model_name, int device_index) {
#if ACCELKIT_HAS_AOTI_PACKAGE && ACCELKIT_TORCH_AT_LEAST(2, 8)
    loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
        path, model_name, /*run_single_threaded=*/false, /*num_runners=*/1,
        static_cast<c10::DeviceIndex>(device_index));
#elif ACCELKIT_HAS_AOTI_PACKAGE
    TORCH_CHECK(device_index <= 0, "LibTorch ", TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR,
                " loads a package onto the current device only; device index ", device_index, " needs 2.8");
    loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(path, model_name);
#else
    (void)path, (void)model_name, (void)device_index;
    TORCH_CHECK(false, "AOTInductor packages (.pt2) need LibTorch >= 2.6; this is ", TORCH_VERSION_MAJOR, ".",
                TORCH_VERSION_MINOR, ".", TORCH_VERSION_PATCH);
#endif
  }

  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) {
#if ACCELKIT_HAS_AOTI_PACKAGE
    return loader_->run(inputs);
#else
    (void)inputs;
    return {};
#endif
  }

  // The elements of the constants the package holds (its model's parameters and buffers, none
  // that constant folding made; inductor writes some tiny ones, such as a 4-element bias, into
  // its code instead, and those are not counted), or -1 where this LibTorch cannot list them
  // (before 2.8).
  std::int64_t constant_elements() {
#if ACCELKIT_HAS_AOTI_PACKAGE && ACCELKIT_TORCH_AT_LEAST(2, 8)
    std::int64_t n = 0;
    for (const auto& named : loader_->get_runner()->extract_constants_map(/*use_inactive=*/false))
      n += named.second.numel();
    return n;
#else
    return -1;
#endif
  }

  // The package's metadata (AOTI_DEVICE_KEY, AOTI_CPU_ISA, and what the exporter added with
  // inductor_configs={"aot_inductor.metadata": {...}}).
  std::unordered_map<std::string, std::string> metadata() {
#if ACCELKIT_HAS_AOTI_PACKAGE
    return loader_->get_metadata();
#else
    return {};
#endif
  }

 private:
#if ACCELKIT_HAS_AOTI_PACKAGE
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
#endif
};

}  // namespace accelkit::compat
