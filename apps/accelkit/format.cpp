#include "format.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace accelkit::cli {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Canonical spelling of a boolean or dtype value as LibTorch or a plugin may print it.
std::string canonical(std::string v) {
  for (std::string prefix : {"torch.", "c10::ScalarType::", "at::ScalarType::", "at::", "c10::"})
    if (v.rfind(prefix, 0) == 0) v = v.substr(prefix.size());
  if (v.size() > 1 && v[0] == 'k' && std::isupper(static_cast<unsigned char>(v[1]))) v = v.substr(1);
  v = lower(std::move(v));
  if (v == "true" || v == "1" || v == "on" || v == "yes" || v == "enabled") return "true";
  if (v == "false" || v == "0" || v == "off" || v == "no" || v == "disabled") return "false";
  if (v == "bf16" || v == "bfloat16") return "bf16";
  if (v == "fp16" || v == "half" || v == "float16") return "fp16";
  if (v == "fp32" || v == "float" || v == "float32") return "fp32";
  if (v == "fp64" || v == "double" || v == "float64") return "fp64";
  return v;
}

}  // namespace

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string human_bytes(std::uint64_t bytes) {
  if (bytes == 0) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::vector<std::string> capability_names(const CapabilitySet& caps) {
  std::vector<std::string> out;
  for (auto c : caps.typed) out.emplace_back(to_string(c));
  for (const auto& [k, v] : caps.extra) out.push_back(k + "=" + v);
  return out;
}

std::optional<std::string> intended_value(const AppliedValue& read, const PrecisionPlan& plan) {
  switch (read.field) {
    case PlanField::threads:
      if (plan.threads <= 0) return std::nullopt;  // left at LibTorch's default
      return std::to_string(plan.threads);
    case PlanField::tf32: return plan.tf32 ? "true" : "false";
    case PlanField::autocast: return plan.autocast ? "true" : "false";
    case PlanField::autocast_dtype:
      if (!plan.autocast) return std::nullopt;  // meaningless while autocast is off
      return std::string(to_string(plan.dtype));
    case PlanField::loss_scaling: return plan.loss_scaling ? "true" : "false";
    case PlanField::blas_kernels:
      if (plan.blas_kernels.empty()) return std::nullopt;
      return plan.blas_kernels;
    case PlanField::other: return std::nullopt;
  }
  return std::nullopt;
}

bool same_value(const std::string& intended, const std::string& read) {
  return canonical(intended) == canonical(read);
}

}  // namespace accelkit::cli
