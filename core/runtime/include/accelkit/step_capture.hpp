// One training step run the way the `compile` setting and the device allow: recorded once and
// replayed (Device::capture_step, e.g. a CUDA graph) or eager, with the reason either way.
//
//   at::Tensor x = ..., y = ..., loss = at::zeros({}, x.options());   // static tensors
//   auto step = rt->capture_step(*opt, [&] {
//     accelkit::zero_grad(*opt);
//     at::Tensor l = at::mse_loss(model->forward(x), y);
//     l.backward();
//     opt->step();
//     loss.copy_(l.detach());                  // read it after run(), not inside the step
//   });
//   for (...) { x.copy_(next_x); y.copy_(next_y); step->run(); }
//   std::cout << step->mode_reason() << '\n';
//
// The step must work on static tensors (refilled in place, never replaced) and do nothing on
// the host that depends on device values: a replay repeats only the recorded device work.
// Rules (Runtime::capture_step):
//   compile = off                          eager, "compile = off (from <origin>)"
//   device without graph_capture           eager with the reason, except compile = graph set
//                                          by the user (file, env, cli): DeviceUnavailableError
//   device refuses (capture_step error)    eager with the device's message
//   capture fails while running            eager from then on, the plugin's reason
// The optimizer, the step function's tensors and the model outlive the StepCapture.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "accelkit/settings.hpp"

namespace torch::optim { class Optimizer; }

namespace accelkit {

class CapturedStep;
class Device;

class StepCapture {
 public:
  // Eager: run() calls `step`; `reason` says why it is not captured.
  StepCapture(std::function<void()> step, std::string reason);
  // Through the plugin's CapturedStep; `where` names the device and the setting for reasons.
  StepCapture(std::shared_ptr<CapturedStep> captured, std::string where);
  ~StepCapture();
  StepCapture(const StepCapture&) = delete;
  StepCapture& operator=(const StepCapture&) = delete;

  // One training step. Throws std::runtime_error when the step failed inside the plugin
  // (the step function's own exception, as one line); eager steps throw what `step` throws.
  void run();
  // The step is being replayed from a recording.
  bool captured() const noexcept { return captured_; }
  // The step runs eagerly for good: never captured, or fell back. Neither this nor captured()
  // while the plugin is still warming up.
  bool eager() const noexcept { return !plugin_ || fell_back_; }
  // Why it runs as it does: "compile = off (from --compile)", "graph capture on cuda:0 ...",
  // "warming up ...", or the plugin's fallback reason.
  const std::string& mode_reason() const noexcept { return reason_; }
  // "graph" when captured, else "eager: <mode_reason()>".
  std::string mode() const;

 private:
  std::function<void()> step_;
  std::shared_ptr<CapturedStep> plugin_;
  std::string where_;
  std::string reason_;
  bool captured_ = false;
  bool fell_back_ = false;
};

// The name this class had before it was named for what it does (the README lists the renames).
using StepRunner [[deprecated("renamed accelkit::StepCapture (step_capture.hpp)")]] = StepCapture;

// The rules above for one device and its compile setting; what Runtime::capture_step calls
// (and tests, with a device of their own). Throws DeviceUnavailableError for an explicit
// compile = graph the device cannot honour, std::invalid_argument for warmup < 1 or an empty
// step.
std::unique_ptr<StepCapture> make_step_capture(Device& device, const Setting<CompileMode>& compile,
                                             torch::optim::Optimizer& optimizer, std::function<void()> step,
                                             int warmup);

}  // namespace accelkit
