#include "format.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <type_traits>
#include <variant>

namespace accelkit::cli {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

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

std::string setting_text(const Settings& s, const char* key, const std::string& fallback) {
  try {
    return std::visit(
        [](const auto& v) -> std::string {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) return v ? "on" : "off";
          else if constexpr (std::is_same_v<T, std::int64_t>) return std::to_string(v);
          else if constexpr (std::is_same_v<T, std::string>) return v;
          else return {};
        },
        s.get(key).value);
  } catch (const std::out_of_range&) {
    return fallback;
  }
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

std::vector<std::string> capability_names(const CapabilitySet& caps) {
  std::vector<std::string> out;
  for (auto c : caps.typed) out.emplace_back(to_string(c));
  for (const auto& [k, v] : caps.extra) out.push_back(k + "=" + v);
  return out;
}

PrecisionRequest precision_request_from(const Settings& settings) {
  PrecisionRequest r;
  r.precision = setting_text(settings, "precision", "auto");
  r.tf32 = setting_text(settings, "tf32", "auto");
  r.blas = setting_text(settings, "blas_kernels", "auto");
  const std::string threads = setting_text(settings, "threads", "0");
  try {
    r.threads = threads == "auto" ? 0 : std::max(0, std::stoi(threads));
  } catch (const std::exception&) {
    r.threads = 0;
  }
  return r;
}

std::optional<std::string> intended_value(const std::string& raw_key, const PrecisionPlan& plan) {
  const std::string key = lower(raw_key);
  if (contains(key, "interop")) return std::nullopt;
  if (contains(key, "thread")) {
    if (plan.threads <= 0) return std::nullopt;  // left at LibTorch's default
    return std::to_string(plan.threads);
  }
  if (contains(key, "tf32")) return plan.tf32 ? "true" : "false";
  if (contains(key, "autocast") && (contains(key, "dtype") || contains(key, "type"))) {
    if (!plan.autocast) return std::nullopt;  // meaningless while autocast is off
    return plan.dtype;
  }
  if (contains(key, "autocast")) return plan.autocast ? "true" : "false";
  if (contains(key, "loss_scal")) return plan.loss_scaling ? "true" : "false";
  if (contains(key, "blas") && !plan.blas_kernels.empty()) return plan.blas_kernels;
  return std::nullopt;
}

bool same_value(const std::string& /*key*/, const std::string& intended, const std::string& read) {
  return canonical(intended) == canonical(read);
}

}  // namespace accelkit::cli
