#include "generic_step.hpp"

#include <exception>
#include <utility>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "accelkit/sdk/support/host_file.hpp"

namespace accelkit::torch_generic {

std::string GenericCapturedStep::refusal(const torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer)) return "";
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer) || dynamic_cast<const torch::optim::Adam*>(&optimizer))
    return "the optimizer counts its steps on the host (torch::optim's Adam and AdamW), so every replay would "
           "repeat the captured step's bias correction; running eagerly";
  return "the torch plugin records only SGD steps (an optimizer's host-side state would be frozen into the graph); "
         "running eagerly";
}

GenericCapturedStep::GenericCapturedStep(torch::optim::Optimizer& optimizer, std::function<void()> step, int warmup)
    : optimizer_(optimizer), step_(std::move(step)), warmup_(warmup < 1 ? 1 : warmup), fallback_(refusal(optimizer)) {}

std::vector<double> GenericCapturedStep::learning_rates() const {
  std::vector<double> out;
  for (const auto& g : optimizer_.param_groups()) out.push_back(g.options().get_lr());
  return out;
}

void GenericCapturedStep::try_capture() {
  std::string failure;
  auto graph = std::make_unique<compat::AcceleratorGraph>();
  bool began = false;
  try {
    graph->capture_begin();
    began = true;
    step_();
    graph->capture_end();
    began = false;
    graph->instantiate();
  } catch (const std::exception& e) {
    failure = host::first_line(e.what());
  } catch (...) {
    failure = "unknown exception";
  }
  if (!failure.empty()) {
    if (began) {
      try {
        graph->capture_end();  // leave the stream out of capture mode before the eager run
      } catch (...) {
      }
    }
    try {
      graph->reset();
    } catch (...) {
    }
    fallback_ = "graph capture failed, running eagerly: " + failure;
    step_();  // the captured step never ran: run it now, so none is lost
    return;
  }
  graph_ = std::move(graph);
  captured_lrs_ = learning_rates();
  graph_->replay();  // capture only recorded the step: replay it once so this call trains too
}

Status GenericCapturedStep::run() noexcept {
  try {
    ++runs_;
    if (graph_ && fallback_.empty()) {
      if (learning_rates() != captured_lrs_) {
        fallback_ = "a learning rate changed after the capture (a schedule), and the graph replays the captured one; "
                    "running eagerly";
        graph_.reset();
        step_();
      } else {
        graph_->replay();
      }
    } else if (!fallback_.empty() || runs_ <= warmup_) {
      step_();
    } else {
      try_capture();
    }
    return Status();
  } catch (const std::exception& e) {
    return Status(StatusCode::internal, "the training step failed: " + host::first_line(e.what()));
  }
}

}  // namespace accelkit::torch_generic
