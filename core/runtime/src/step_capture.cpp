#include "plugin_call.hpp"
#include "accelkit/step_capture.hpp"

#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include "accelkit/context.hpp"
#include "accelkit/sdk/device.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/settings.hpp"
#include "accelkit/sdk/step_capture.hpp"
#include "tuning/step_tuning_control.hpp"

namespace accelkit {

StepCapture::StepCapture(std::function<void()> step, std::string reason)
    : step_(std::move(step)), reason_(std::move(reason)) {}

StepCapture::StepCapture(std::shared_ptr<CapturedStep> captured, std::string where)
    : plugin_(std::move(captured)), where_(std::move(where)) {
  reason_ = "warming up before graph capture on " + where_;
}

StepCapture::~StepCapture() = default;

void StepCapture::run() {
  if (!plugin_) {
    step_();
    return;
  }
  if (Status st = plugin_->run(); !st.is_ok()) throw std::runtime_error("training step failed: " + st.message());
  if (fell_back_) return;
  if (plugin_->captured()) {
    if (!captured_) reason_ = "graph: the step is replayed from a recording on " + where_;
    captured_ = true;
    return;
  }
  std::string why = call_plugin(where_, "CapturedStep::fallback_reason()", [&] { return plugin_->fallback_reason(); });
  if (why.empty()) return;
  // Falling back is final (step_capture.hpp): the plugin runs the step eagerly from now on.
  fell_back_ = true;
  captured_ = false;
  reason_ = std::move(why);
  spdlog::warn("graph capture on {}: {}", where_, reason_);
}

std::string StepCapture::mode() const { return captured_ ? "graph" : "eager: " + reason_; }

std::unique_ptr<StepCapture> make_step_capture(Device& device, const Setting<CompileMode>& compile,
                                             torch::optim::Optimizer& optimizer, std::function<void()> step,
                                             int warmup) {
  if (!step) throw std::invalid_argument("capture_step: the step function is empty");
  if (warmup < 1) throw std::invalid_argument("capture_step: warmup must be at least 1, got " + std::to_string(warmup));
  const std::string& id = device.info().id;
  const std::string asked = std::string("compile = ") + to_string(*compile) + " (from " + compile.from() + ")";
  if (*compile == CompileMode::off) return std::make_unique<StepCapture>(std::move(step), asked);

  // An explicit request is honoured or fails loudly; a default's or a profile's is skipped.
  const bool explicit_graph = *compile == CompileMode::graph && compile.user_set();
  auto eager = [&](const std::string& why) {
    if (explicit_graph) throw DeviceUnavailableError(asked + " but " + why);
    return std::make_unique<StepCapture>(std::move(step), asked + ": " + why);
  };
  if (!device.info().capabilities.has(Capability::graph_capture))
    return eager(id + " has no graph_capture capability");
  auto captured = device.capture_step(optimizer, step, warmup);
  if (!captured.ok()) return eager(id + " cannot capture the step: " + captured.status().message());
  if (!captured.value()) return eager(id + " returned no captured step");
  // A refusal known before the first step (an optimizer it cannot record) counts as one.
  if (std::string why = call_plugin(id, "CapturedStep::fallback_reason()",
                                    [&] { return captured.value()->fallback_reason(); });
      !why.empty())
    return eager(id + " cannot capture the step: " + why);
  return std::make_unique<StepCapture>(std::move(captured).value(), id + " (" + asked + ")");
}

std::unique_ptr<StepCapture> Runtime::capture_step(torch::optim::Optimizer& optimizer, std::function<void()> step,
                                                  int warmup) {
  // A captured step replays the kernels recorded at capture: switching its autocast or threads
  // per step (step tuning) would change nothing after the capture, so it is off from here.
  if (*context_->config().compile != CompileMode::off && device_->info().capabilities.has(Capability::graph_capture))
    steps_->no_step_tuning("the step is graph-captured (capture_step): a replay runs the kernels recorded at capture");
  return make_step_capture(*device_, context_->config().compile, optimizer, std::move(step), warmup);
}

}  // namespace accelkit
