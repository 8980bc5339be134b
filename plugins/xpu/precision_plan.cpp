#include "precision_plan.hpp"

namespace accelkit::xpu {

Result<PrecisionPlan> plan_xpu_precision(const PrecisionRequest& request, const XpuRules& rules,
                                         const std::string& device_name) {
  const std::optional<Dtype>& want = request.precision;
  const std::string arch = to_string(rules.arch);
  if (request.tf32 == Toggle::on && !rules.tf32)
    return Status(StatusCode::not_supported, "tf32 = on: " + device_name + " (" + arch +
                                                 ") has no TF32 matrix engines (use tf32 = auto or off)");
  if ((want == Dtype::bf16 && !rules.bf16) || (want == Dtype::fp16 && !rules.fp16))
    return Status(StatusCode::not_supported,
                  std::string("precision ") + to_string(*want) + " is not supported on " + device_name + " (" + arch +
                      "): " + (rules.reasons.empty() ? std::string("no rule offers it") : rules.reasons.front()));
  if (request.threads < 0)
    return Status(StatusCode::invalid_argument, "threads must be >= 0, got " + std::to_string(request.threads));
  PrecisionPlan p;
  p.dtype = want.value_or(rules.dtype);
  p.autocast = p.dtype != Dtype::fp32;
  p.loss_scaling = p.dtype == Dtype::fp16;
  p.tf32 = rules.tf32 && request.tf32 != Toggle::off;
  p.threads = request.threads;
  if (!want) {
    p.reasons = rules.reasons;
  } else {
    p.reasons.push_back(std::string(to_string(*want)) + ": requested");
    for (std::size_t i = 1; i < rules.reasons.size(); ++i) p.reasons.push_back(rules.reasons[i]);
  }
  if (rules.tf32 && request.tf32 == Toggle::off) p.reasons.push_back("tf32: off (requested)");
  if (p.loss_scaling) p.reasons.push_back("loss scaling: fp16 gradients underflow without it");
  return p;
}

}  // namespace accelkit::xpu
