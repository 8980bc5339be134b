#include "precision_plan.hpp"

namespace accelkit::rocm {

Result<PrecisionPlan> plan_rocm_precision(const PrecisionRequest& request, const ArchRules& rules,
                                          const std::string& device_name) {
  const std::string& want = request.precision;
  if (want != "auto" && want != "fp32" && want != "bf16" && want != "fp16")
    return Status(StatusCode::invalid_argument, "precision must be auto, fp32, bf16 or fp16, got '" + want + "'");
  if (request.tf32 == "on")
    return Status(StatusCode::not_supported, "tf32 = on: TF32 is not offered on " + device_name +
                                                 " (use tf32 = auto or off)");
  if ((want == "bf16" && !rules.bf16) || (want == "fp16" && !rules.fp16))
    return Status(StatusCode::not_supported,
                  "precision " + want + " is not supported on " + device_name + " (" + to_string(rules.family) +
                      "): " + (rules.reasons.empty() ? std::string("no rule offers it") : rules.reasons.front()));
  PrecisionPlan p;
  p.dtype = want == "auto" ? rules.dtype : want;
  p.autocast = p.dtype != "fp32";
  p.loss_scaling = p.dtype == "fp16";
  p.tf32 = false;
  p.threads = request.threads;
  if (want == "auto") {
    p.reasons = rules.reasons;
  } else {
    p.reasons.push_back(want + ": requested");
    for (std::size_t i = 1; i < rules.reasons.size(); ++i) p.reasons.push_back(rules.reasons[i]);
  }
  if (p.loss_scaling) p.reasons.push_back("loss scaling: fp16 gradients underflow without it");
  for (const EnvSetting& e : arch_environment(rules)) p.reasons.push_back(e.name + "=" + e.value + ": " + e.why);
  return p;
}

}  // namespace accelkit::rocm
