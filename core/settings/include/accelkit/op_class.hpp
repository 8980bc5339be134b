// Operation classes that can be routed away from the negotiated device (routing.hpp): the
// names the [routing] settings table and the plugins' "route.<op>" capabilities use.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace accelkit {

enum class OpClass { fft, sort, scatter, index, cumsum, topk, linalg };

inline constexpr std::pair<OpClass, std::string_view> kOpClassNames[] = {
    {OpClass::fft, "fft"},         // torch::fft::*
    {OpClass::sort, "sort"},       // sort, argsort, unique
    {OpClass::scatter, "scatter"}, // scatter, scatter_add, index_put with accumulate
    {OpClass::index, "index"},     // gather, index_select, embedding lookups
    {OpClass::cumsum, "cumsum"},   // cumsum, cumprod, scans
    {OpClass::topk, "topk"},       // topk, kthvalue
    {OpClass::linalg, "linalg"},   // torch::linalg decompositions and solvers
};
inline constexpr std::size_t kOpClassCount = std::size(kOpClassNames);

std::string_view to_string(OpClass op) noexcept;
std::optional<OpClass> op_class_from_string(std::string_view name) noexcept;
std::vector<std::string> op_class_names();

}  // namespace accelkit
