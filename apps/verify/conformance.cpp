#include "accelkit/conformance.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>

#include "accelkit/runtime.hpp"
#include "check_util.hpp"

namespace accelkit::conformance {

const char* to_string(Outcome o) noexcept {
  switch (o) {
    case Outcome::pass: return "pass";
    case Outcome::fail: return "FAIL";
    case Outcome::skipped: return "skipped";
  }
  return "?";
}

int DeviceReport::count(Outcome o) const {
  return static_cast<int>(std::count_if(results.begin(), results.end(), [o](const CheckResult& r) { return r.outcome == o; }));
}

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

bool same_value(const std::string& intended, const std::string& read) { return canonical(intended) == canonical(read); }

namespace detail {

at::Tensor Run::randn(at::IntArrayRef sizes, at::ScalarType dtype) const {
  return at::randn(sizes, gen, at::TensorOptions().dtype(at::kFloat)).to(dev, dtype);
}

void Run::add(CheckResult r) const {
  if (options.on_result) options.on_result(r);
  report.results.push_back(std::move(r));
}

void Run::check(const std::string& capability, const std::string& name, const std::function<CheckResult()>& body) const {
  const auto t0 = std::chrono::steady_clock::now();
  CheckResult r;
  try {
    r = body();
  } catch (const c10::Error& e) {
    r = fail(std::string("threw: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    r = fail(std::string("threw: ") + e.what());
  } catch (...) {
    r = fail("threw a non-standard exception");
  }
  r.capability = capability;
  r.name = name;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  add(std::move(r));
}

void Run::skip(const std::string& capability, const std::string& name, const std::string& why) const {
  CheckResult r;
  r.capability = capability;
  r.name = name;
  r.outcome = Outcome::skipped;
  r.detail = why;
  add(std::move(r));
}

CheckResult pass(std::string detail, std::optional<double> error, std::optional<double> tol) {
  return CheckResult{"", "", Outcome::pass, std::move(detail), error, tol, 0};
}
CheckResult fail(std::string detail, std::optional<double> error, std::optional<double> tol) {
  return CheckResult{"", "", Outcome::fail, std::move(detail), error, tol, 0};
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

CheckResult judge(const std::string& what, double error, double tol, const std::string& why) {
  const bool ok = std::isfinite(error) && error <= tol;
  std::string d = what + " " + num(error) + (ok ? " <= " : " > ") + num(tol) + " (" + why + ")";
  return ok ? pass(std::move(d), error, tol) : fail(std::move(d), error, tol);
}

double rel_error(const at::Tensor& a, const at::Tensor& ref) {
  const auto r = ref.detach().to(at::kCPU, at::kDouble);
  const double denom = r.norm().item<double>();
  const double diff = (a.detach().to(at::kCPU, at::kDouble) - r).norm().item<double>();
  return denom > 0 ? diff / denom : diff;
}

double max_rel(const at::Tensor& a, const at::Tensor& ref) {
  const auto r = ref.detach().to(at::kCPU, at::kDouble);
  const double denom = r.abs().max().item<double>();
  const double diff = (a.detach().to(at::kCPU, at::kDouble) - r).abs().max().item<double>();
  return denom > 0 ? diff / denom : diff;
}

const char* dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "fp32";
    case at::kBFloat16: return "bf16";
    case at::kHalf: return "fp16";
    case at::kDouble: return "fp64";
    default: return c10::toString(t);
  }
}

at::ScalarType scalar_type(Dtype d) {
  switch (d) {
    case Dtype::bf16: return at::kBFloat16;
    case Dtype::fp16: return at::kHalf;
    case Dtype::fp32: return at::kFloat;
  }
  return at::kFloat;
}

PrecisionPlan apply_request(Device& device, const PrecisionRequest& request) {
  auto precision = device.precision();
  if (!precision.ok()) throw std::runtime_error("the device has no precision rules: " + precision.status().message());
  auto plan = precision.value()->plan(request);
  if (!plan.ok()) throw std::runtime_error("its plan refused the request: " + plan.status().message());
  const Status applied = precision.value()->apply(plan.value());
  if (!applied.is_ok()) throw std::runtime_error("applying its plan failed: " + applied.message());
  return plan.value();
}

}  // namespace detail

DeviceReport check_device(Device& device, const CheckOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  DeviceReport report;
  report.device = device.info();
  report.seed = options.seed ? options.seed
                             : static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (report.device.torch_device.empty())
    throw std::invalid_argument(report.device.id + ": LibTorch here cannot drive this device; nothing can be checked");
  detail::Run run{device, c10::Device(report.device.torch_device), options, report,
                  at::detail::createCPUGenerator(report.seed)};
  detail::check_plan(run);
  detail::check_dtypes(run);
  try {  // the settings' plan again for what follows (a failure is the plan check's)
    detail::apply_request(device, options.request);
  } catch (const std::exception&) {
  }
  detail::check_routes(run);
  detail::check_sdpa(run);
  detail::check_optimizers(run);
  detail::check_graph_capture(run);
  detail::check_sensors(run);
  detail::check_collectives(run);
  if (options.training) detail::check_training(run);
  // The device's own plan back, as it ran before.
  try {
    detail::apply_request(device, options.request);
  } catch (const std::exception& e) {
    run.check("plan", "the settings' plan applied again after the checks", [&] { return detail::fail(e.what()); });
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

std::vector<std::string> usable_devices(const Context& ctx) {
  std::vector<const Candidate*> usable;
  for (const auto& c : ctx.decision().candidates)
    if ((c.excluded == Exclusion::none || c.excluded == Exclusion::not_requested ||
         c.excluded == Exclusion::reference_only || c.excluded == Exclusion::missing_capability ||
         c.excluded == Exclusion::no_gpu) &&
        !c.device.torch_device.empty())
      usable.push_back(&c);
  // A device LibTorch does not know is registered by its Runtime::start, which must come
  // before any backward in the process (LibTorch's autograd counts devices once): first.
  std::stable_partition(usable.begin(), usable.end(),
                        [](const Candidate* c) { return c->device.torch_device.rfind("privateuseone", 0) == 0; });
  std::vector<std::string> ids;
  for (const auto* c : usable) ids.push_back(c->device.id);
  return ids;
}

DeviceReport check_runtime_device(const ContextOptions& base, const std::string& id, const CheckOptions& options) {
  ContextOptions o = base;
  if (!id.empty()) o.settings.cli.emplace_back("device", id);
  auto rt = Runtime::start(o);
  CheckOptions opts = options;
  opts.request = precision_request_from(rt->context().config());
  opts.routes = rt->routes();
  return check_device(*rt->device_handle(), opts);
}

std::vector<DeviceReport> check_plugin_dir(const std::string& dir, const CheckOptions& options) {
  ContextOptions base;
  base.loader.cli_paths = {dir};
  base.loader.rescan = true;
  const auto ids = usable_devices(*Context::create(base));
  if (ids.empty()) throw std::runtime_error("no usable device from the plugins in " + dir + " ('accelkit --plugin-path " +
                                            dir + " plugins -v' says why)");
  base.loader.rescan = false;
  std::vector<DeviceReport> out;
  for (const auto& id : ids) out.push_back(check_runtime_device(base, id, options));
  return out;
}

}  // namespace accelkit::conformance
