// What the checks share (not installed): the running report, inputs from one seeded
// generator, error measures against a CPU fp64 reference, and the check wrapper.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>

#include <torch/types.h>

#include "accelkit/conformance.hpp"

namespace accelkit::conformance::detail {

struct Run {
  Device& device;
  c10::Device dev;  // the device's LibTorch device
  const CheckOptions& options;
  DeviceReport& report;
  mutable at::Generator gen;  // CPU generator: every input is drawn on the CPU, then moved

  const DeviceInfo& info() const { return device.info(); }
  bool claims(Capability c) const { return info().capabilities.has(c); }
  // Fresh standard-normal values on the device.
  at::Tensor randn(at::IntArrayRef sizes, at::ScalarType dtype = at::kFloat) const;
  void add(CheckResult r) const;
  // Runs `body` as one check: times it; an exception is that check's failure.
  void check(const std::string& capability, const std::string& name, const std::function<CheckResult()>& body) const;
  void skip(const std::string& capability, const std::string& name, const std::string& why) const;
};

CheckResult pass(std::string detail, std::optional<double> error = std::nullopt, std::optional<double> tol = std::nullopt);
CheckResult fail(std::string detail, std::optional<double> error = std::nullopt, std::optional<double> tol = std::nullopt);
// pass or fail as `error` <= `tol`; the detail reads "<what>: <error> (tolerance <tol>: <why>)".
CheckResult judge(const std::string& what, double error, double tol, const std::string& why);

// ||a - ref|| / ||ref|| (Frobenius), both taken to the CPU in fp64.
double rel_error(const at::Tensor& a, const at::Tensor& ref);
// max |a - ref| / max |ref|, both taken to the CPU in fp64.
double max_rel(const at::Tensor& a, const at::Tensor& ref);
std::string num(double v);  // "%.3g"
const char* dtype_name(at::ScalarType t);
at::ScalarType scalar_type(Dtype d);

// The device's plan for `request`, applied; throws std::runtime_error with the plugin's message.
PrecisionPlan apply_request(Device& device, const PrecisionRequest& request);

// The check groups (one file each).
void check_plan(const Run& run);
void check_dtypes(const Run& run);
void check_routes(const Run& run);
void check_sdpa(const Run& run);
void check_optimizers(const Run& run);
void check_graph_capture(const Run& run);
void check_sensors(const Run& run);
void check_training(const Run& run);
void check_collectives(const Run& run);

}  // namespace accelkit::conformance::detail
