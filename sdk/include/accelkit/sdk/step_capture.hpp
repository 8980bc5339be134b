// CapturedStep: one whole training step (forward, backward, optimizer step) that a plugin
// records once - a CUDA graph, say - and replays from then on, falling back to running it
// eagerly, with the reason, when recording is impossible. Created by
// Device::capture_step() (device.hpp). Since ABI 2.0.
//
// What the step function may do. It is the caller's std::function<void()>; it runs forward,
// backward and optimizer.step() on *static* tensors: inputs and targets live in tensors the
// caller refills in place (copy_) before each run(), never replaces; a result the caller wants
// (the loss) is written by the step into a tensor the caller made beforehand (copy_), never
// returned. A replay re-executes exactly the recorded device work, so anything the step does
// on the host (reading a value, branching on it, Python-side counters) happens during
// recording only. The optimizer passed to capture_step is the one the step steps; a plugin
// checks whether it can be recorded (an optimizer that keeps its step count on the host would
// freeze it into the recording) and refuses it with a reason.
//
// Life of a captured step, as the plugin runs it:
//   1. the first `warmup` calls of run() execute the step eagerly (libraries and optimizer
//      state settle, buffers reach their final addresses);
//   2. the next call records it and then replays the recording once, so that call trains like
//      every other;
//   3. later calls replay.
// If recording fails at any point the plugin abandons it, runs the step eagerly from then on
// and fallback_reason() says why. A step that failed while being recorded is re-run eagerly
// in the same call: no step is lost and none is applied twice. Falling back is final.
//
// Ownership: the host holds a CapturedStep through std::shared_ptr; the plugin's library
// stays loaded while it lives. The CapturedStep keeps references to the optimizer and to the
// tensors the step function uses: the caller keeps them alive (and at the same addresses) for
// as long as the CapturedStep lives, and destroys the CapturedStep before them.
// Thread-safety: none. One thread drives a CapturedStep; the plugin may require that it is
// the thread that created it.
#pragma once

#include <string>

#include "accelkit/sdk/status.hpp"

namespace accelkit {

class CapturedStep {
 public:
  virtual ~CapturedStep() = default;

  // Runs one training step: eager (warm-up or after a fallback), record-then-replay, or
  // replay. An ok Status means the step was applied exactly once, however it ran (a failed
  // recording is not an error: the step ran eagerly and fallback_reason() says why).
  // A non-ok Status means the step itself failed - the step function threw, or the device
  // reported an error - and says what; the model is then in whatever state an eager step
  // that threw at that point would leave, and the caller should not go on training.
  virtual Status run() noexcept = 0;

  // True once the step is recorded and run() replays it. Never true together with a non-empty
  // fallback_reason().
  virtual bool captured() const noexcept = 0;

  // Why the step runs eagerly: one line for humans ("graph capture failed, running eagerly:
  // operation not permitted when stream is capturing"). Empty while recording is still to
  // come (warm-up) or has succeeded. Once non-empty it stays so. May allocate; may throw
  // std::bad_alloc.
  virtual std::string fallback_reason() const = 0;
};

}  // namespace accelkit
