// Step tuning's part in the Runtime (step_tuning.hpp has the idea and the StepTuner state
// machine): the candidates the runtime's plan and settings leave, the configuration each
// autocast() scope runs with, the decision recorded and cached, and a data-parallel run's
// agreement. One per Runtime, which owns it.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "accelkit/adamw_choice.hpp"
#include "accelkit/machine_load.hpp"
#include "accelkit/step_tuning.hpp"
#include "accelkit/runtime/layout_watch.hpp"
#include "tuning/weight_layout.hpp"

namespace accelkit {

class Runtime;

namespace detail {

class StepTuning {
 public:
  // Reads the runtime's settings, plan and device as they are at each call (the auto-tuner and
  // a data-parallel run change the plan after start).
  explicit StepTuning(Runtime& rt) : rt_(rt) {}
  StepTuning(const StepTuning&) = delete;
  StepTuning& operator=(const StepTuning&) = delete;

  // The candidates for the plan and settings, observed from the next training step on; off,
  // with the reason, where the settings leave nothing to choose.
  void setup();
  // This autocast() scope's configuration, applied (threads, the thread's autocast, kernels).
  StepConfig config();
  // Where step tuning stands: off (why), observing, or decided (what, from where, why).
  const StepTuningStatus& status() const noexcept { return status_; }
  // Whether it is observing or has decided (not off).
  bool on() const noexcept { return tuner_ != nullptr; }
  void no_step_tuning(const std::string& why);  // unless already decided
  void turn_off(std::string why);              // whatever its state
  // The ranks of a data-parallel run decide together from here (join_data_parallel).
  void agree_on_steps(StepAgreement agreement);
  // Every rank of a data-parallel run steps with rank 0's AdamW implementation (`optimizers`
  // offers them); nothing to do outside one.
  void agree_on_adamw(AdamWImplChoice& choice, Optimizer& optimizers) const;
  // The model's weights became bf16 (master weights): only the autocast candidates are left.
  void drop_unweighted_candidates(const std::string& why);
  // The program's model (Runtime::prepare): where it has 2-D convolutions and observation has
  // not begun, the plan (and fp32) are offered with channels-last weights too - at once with channels_last =
  // on; with auto, once the first training step was watched (layout_watch.hpp) and found safe.
  void note_module(torch::nn::Module& module);
  // The params of the optimizer just made, which name the model in the cache's key.
  void note_model(const std::vector<at::Tensor>& params, const char* optimizer);
  // The program stepped `optimizer` through Runtime::step. Once the optimizers' order is seen
  // (the one stepped just before the first steps again ends each step), a step is the interval
  // between two steps of that optimizer, however many autocast() scopes it holds (a GAN's has
  // four forwards), and each scope in it runs with the configuration the step began with. A step
  // taken inside a scope ends its step there; the next top-level scope begins the next.
  void optimizer_stepped(const void* optimizer);
  // The program gave its optimizer to Runtime::prepare: its steps will mark the training steps, so
  // from the first training scope on, scopes keep the configuration until the optimizer steps
  // (tensors made in one scope of a step, a GAN's generated images, meet the next in its dtype).
  // Where no mark comes within 64 scopes, each scope is a step again.
  void expect_step_marks() noexcept { marks_expected_ = true; }

 private:
  // A top-level scope or a marked step begins: the tuner's turn, applied.
  StepConfig advance(bool training);
  // Whose operator kernels the plan's steps run.
  StepKernels plan_kernels() const noexcept;
  void make_tuner(const std::vector<StepConfig>& candidates);  // with the agreement, if any
  // The candidates at the most threads (the plan, and fp32 where the plan is autocast) with the
  // prepared model's convolution weights channels-last, as candidates more.
  void offer_channels_last();
  // channels_last = auto: watches the first training step, then offers the candidate where the
  // watch found it safe (called as each training step begins).
  void watch_layout();
  void apply_config(const StepConfig& c);  // threads, the thread's autocast, the weights' layout
  // The tuner's status changed (a decision, a cached one adopted, a re-observation begun).
  void on_change();
  void copy_status();  // the tuner's, with this side's note on the source
  // The decision just observed: cached (unless the machine was busy), recorded and logged.
  void settle_decision();
  std::string cache_path(std::string& key) const;
  void read_cache();
  void write_cache();

  Runtime& rt_;
  std::unique_ptr<StepTuner> tuner_;
  StepTuningStatus status_;
  StepAgreement agreement_;              // a data-parallel run's (join_data_parallel)
  int generation_ = 0;                   // tuners made under it
  // The models the program prepared and the optimizers made here, by their parameters: the
  // step-tuning cache's key.
  std::vector<std::pair<const void*, std::string>> models_;
  std::string model_signature_;          // models_' signatures joined
  StepConfig current_;                   // what the open top-level scope runs with
  std::unique_ptr<WeightLayout> layout_;  // the prepared model's convolution weights; null: none
  bool channels_last_ = false;           // the layout they have now
  bool layout_pending_ = false;          // auto: the first training step is still to be watched
  std::unique_ptr<ChannelsLastWatch> layout_watch_;  // watching it
  std::string layout_note_;              // why the channels-last candidates were not offered, once watched
  std::optional<CpuSample> load_start_;  // the machine's load when observing began
  std::uint64_t changes_seen_ = 0;       // the tuner's changes() last copied
  std::string source_note_;              // "; cached in ..." on the standing decision's source
  const void* step_marker_ = nullptr;    // the optimizer whose steps mark the training steps
  const void* first_stepped_ = nullptr;  // the first optimizer Runtime::step stepped
  const void* last_stepped_ = nullptr;   // the last one, until the mark is known
  bool marks_expected_ = false;          // expect_step_marks()
  int scopes_unmarked_ = 0;              // training scopes begun while expecting the first mark
  bool mark_pending_ = false;            // the marking step came inside a scope: the next scope begins a step
};

}  // namespace detail
}  // namespace accelkit
