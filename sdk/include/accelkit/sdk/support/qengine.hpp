// LibTorch's quantized engines by name: at::QEngine as it prints, lower-cased ("x86",
// "fbgemm", "onednn", "qnnpack") - the spelling of the free key "int8.engine" (capability.hpp).
#pragma once

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

#include <ATen/Context.h>
#include <c10/core/QEngine.h>

namespace accelkit::support {

inline std::string qengine_name(c10::QEngine e) {
  std::string name = c10::toString(e);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

// The engine of that name among this LibTorch's, or nullopt.
inline std::optional<c10::QEngine> qengine_named(const std::string& name) {
  for (const c10::QEngine e : at::globalContext().supportedQEngines())
    if (qengine_name(e) == name) return e;
  return std::nullopt;
}

}  // namespace accelkit::support
