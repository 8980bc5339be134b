#include "graph_step.hpp"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <exception>

#include <accelkit/sdk/torch_compat.hpp>

#include "fused_adamw_cuda.hpp"

namespace accelkit::cuda {
namespace {

std::string first_line(const char* what) {
  std::string s(what ? what : "unknown error");
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

// `waiter` waits (on the device) for the work enqueued on `on` so far.
void wait_for(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& on) {
  at::cuda::CUDAEvent event;
  event.record(on);
  event.block(waiter);
}

// After a failed capture, closes what CUDAGraph::capture_begin opened. LibTorch's capture_end
// ends the stream capture first and throws when the capture was invalidated (a host sync, an
// illegal call) - before it returns the private memory pool and ends the RNG generators' capture
// state, which would then fail every later random op ("Offset increment outside graph capture").
// So: end the invalidated capture here, begin an empty one on the same stream and let
// capture_end close LibTorch's bookkeeping on it.
// Ends `stream`'s capture, if one is under way, and drops what it recorded.
void end_any_capture(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
    cudaGraph_t dropped = nullptr;
    (void)cudaStreamEndCapture(stream, &dropped);
    if (dropped) (void)cudaGraphDestroy(dropped);
  }
}

void abandon_capture(at::cuda::CUDAGraph& graph, const c10::cuda::CUDAStream& stream) {
  end_any_capture(stream.stream());
  (void)cudaGetLastError();
  if (cudaStreamBeginCapture(stream.stream(), cudaStreamCaptureModeGlobal) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  try {
    compat::WarningCollector quiet;  // "The CUDA Graph is empty": it is, on purpose
    graph.capture_end();
  } catch (...) {
    end_any_capture(stream.stream());
  }
  (void)cudaGetLastError();
}

}  // namespace

GraphedStep::GraphedStep(torch::optim::Optimizer& optimizer, StepFn step, int warmup)
    : optimizer_(optimizer), step_(std::move(step)), warmup_(warmup < 1 ? 1 : warmup) {
  auto* fused = dynamic_cast<FusedAdamWCuda*>(&optimizer_);
  if (!fused)
    fallback_reason_ = "the optimizer is not the cuda plugin's fused AdamW, so its step count would be frozen "
                       "into the graph; running eagerly";
  else if (!fused->capturable())
    fused->set_capturable(true);
}

GraphedStep::~GraphedStep() = default;

void GraphedStep::run_eager_on_side_stream() {
  // Warm-up off the capturing stream, as LibTorch's own capture recipe does.
  auto current = at::cuda::getCurrentCUDAStream();
  auto side = at::cuda::getStreamFromPool();
  wait_for(side, current);
  {
    c10::cuda::CUDAStreamGuard guard(side);
    step_();
  }
  wait_for(current, side);
}

void GraphedStep::try_capture() {
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  auto side = at::cuda::getStreamFromPool();
  auto current = at::cuda::getCurrentCUDAStream();
  wait_for(side, current);
  std::string failure;
  {
    c10::cuda::CUDAStreamGuard guard(side);  // capture must not run on the legacy default stream
    bool began = false;
    try {
      graph->capture_begin();
      began = true;
      step_();
      graph->capture_end();
    } catch (const std::exception& e) {
      failure = first_line(e.what());
    } catch (...) {
      failure = "unknown exception";
    }
    if (!failure.empty() && began) abandon_capture(*graph, side);
  }
  wait_for(current, side);
  if (!failure.empty()) {
    fallback_reason_ = "graph capture failed, running eagerly: " + failure;
    // The captured step never ran: run it eagerly so the step is not lost.
    step_();
    return;
  }
  graph_ = std::move(graph);
  // Capture only recorded the step; replay it once so this call trains like the others.
  graph_->replay();
  ++replays_;
}

void GraphedStep::run() {
  ++runs_;
  if (graph_) {
    graph_->replay();
    ++replays_;
  } else if (fell_back()) {
    step_();
  } else if (runs_ <= warmup_) {
    run_eager_on_side_stream();
  } else {
    try_capture();
  }
}

}  // namespace accelkit::cuda
