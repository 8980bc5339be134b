// The trainer: teacher/student MLPs, the step, checkpoints and resume.
#include "accelkit/train.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "accelkit/autotune.hpp"
#include "accelkit/checkpoint.hpp"
#include "accelkit/distributed.hpp"
#include "accelkit/prefetch.hpp"
#include "accelkit/run_metrics.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/version.hpp"

namespace accelkit {

namespace {

constexpr std::int64_t kCheckpointFormat = 1;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Independent generator seeds per purpose and index, all from the one config seed.
enum class Stream : std::uint64_t { teacher = 1, student = 2, data = 3 };
std::uint64_t stream_seed(std::int64_t seed, Stream stream, std::uint64_t index = 0) {
  return splitmix64(splitmix64(static_cast<std::uint64_t>(seed) ^ splitmix64(static_cast<std::uint64_t>(stream))) + index);
}

// The teacher is narrower than the student (width / 8, at least 4): an over-parameterised
// student escapes the long plateaus of same-size teacher-student learning, so the loss keeps
// falling instead of stalling at ~20% of its start.
std::int64_t teacher_width(const TrainConfig& c) { return std::max<std::int64_t>(4, c.width / 8); }

// "MLP 4x256 -> 10": the student's depth, width and outputs.
std::string mlp_name(const TrainConfig& c) {
  return "MLP " + std::to_string(c.depth) + "x" + std::to_string(c.width) + " -> " + std::to_string(c.outputs);
}

// depth x (Linear + tanh) of `hidden` units, then Linear to c.outputs; input c.width.
torch::nn::Sequential make_mlp(const TrainConfig& c, std::int64_t hidden) {
  torch::nn::Sequential mlp;
  for (std::int64_t i = 0; i < c.depth; ++i) {
    mlp->push_back(torch::nn::Linear(i == 0 ? c.width : hidden, hidden));
    mlp->push_back(torch::nn::Tanh());
  }
  mlp->push_back(torch::nn::Linear(hidden, c.outputs));
  return mlp;
}

// Teacher: N(0, 1/fan_in) weights and small random biases: pre-activations of unit variance,
// so tanh is clearly non-linear without saturating. Student: LibTorch's Linear default
// (U(+-1/sqrt(fan_in))), but drawn from our own generator.
void init_mlp(torch::nn::Sequential& mlp, std::uint64_t seed, bool teacher) {
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(seed);
  const std::size_t n = mlp->size();
  for (std::size_t i = 0; i < n; ++i) {
    auto* linear = mlp[i]->as<torch::nn::LinearImpl>();
    if (!linear) continue;
    const double fan_in = static_cast<double>(linear->weight.size(1));
    if (teacher) {
      linear->weight.normal_(0.0, 1.0 / std::sqrt(fan_in), gen);
      linear->bias.normal_(0.0, 0.1, gen);
    } else {
      const double bound = 1.0 / std::sqrt(fan_in);
      linear->weight.uniform_(-bound, bound, gen);
      linear->bias.uniform_(-bound, bound, gen);
    }
  }
}

std::string describe(const PrecisionPlan& plan) {
  if (!plan.autocast) return plan.tf32 ? "fp32 (tf32 matmul)" : "fp32";
  return std::string(to_string(plan.dtype)) + " autocast" + (plan.loss_scaling ? " + loss scaling" : "");
}

std::string join_lines(const std::vector<std::string>& lines, const char* indent) {
  std::string out;
  for (const auto& l : lines) out += std::string("\n") + indent + l;
  return out;
}

void write_int(torch::serialize::OutputArchive& a, const char* key, std::int64_t v) { a.write(key, c10::IValue(v)); }
void write_str(torch::serialize::OutputArchive& a, const char* key, const std::string& v) { a.write(key, c10::IValue(v)); }
void write_double(torch::serialize::OutputArchive& a, const char* key, double v) { a.write(key, c10::IValue(v)); }
double read_double(torch::serialize::InputArchive& a, const char* key) {
  c10::IValue v;
  a.read(key, v);
  return v.toDouble();
}
std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
std::int64_t read_int(torch::serialize::InputArchive& a, const char* key) {
  c10::IValue v;
  a.read(key, v);
  return v.toInt();
}
std::string read_str(torch::serialize::InputArchive& a, const char* key) {
  c10::IValue v;
  a.read(key, v);
  return v.toStringRef();
}

}  // namespace

struct Trainer::State {
  Runtime& rt;
  TrainConfig cfg;
  torch::nn::Sequential teacher{nullptr};
  torch::nn::Sequential student{nullptr};
  OptimizerChoice opt;
  LossScaler scaler;
  std::unique_ptr<GradAccumulator> accumulator;
  std::int64_t step = 0;  // steps completed
  std::optional<BatchDecision> batch_decision;
  // A data-parallel run: each rank trains on its shard of every batch through `dp`.
  std::shared_ptr<dist::ProcessGroup> group;
  std::unique_ptr<DataParallel> dp;
  int world = 1;
  int rank = 0;
  ForwardOwner forwards = ForwardOwner::accelkit;  // this loop runs every forward of the student

  struct Run;  // one call of Trainer::run (below)

  State(Runtime& runtime, TrainConfig config, const std::function<void(const BatchTrial&)>& on_batch_trial,
        std::shared_ptr<dist::ProcessGroup> process_group)
      : rt(runtime), cfg(std::move(config)), group(std::move(process_group)) {
    if (group) {
      world = group->world_size();
      rank = group->rank();
    }
    // read_train_config() validated a file's values; this covers a config built in code.
    if (cfg.steps < 1 || cfg.batch_size < 1 || cfg.micro_batches < 1 || cfg.width < 1 || cfg.depth < 1 ||
        cfg.outputs < 1 || !(cfg.lr > 0) || !(cfg.weight_decay >= 0) || cfg.seed < 0 || cfg.log_every < 1 ||
        cfg.checkpoint_every < 0 || cfg.keep_last < 0)
      throw SettingsError("invalid [train] values: need steps, batch_size, micro_batches, width, depth, outputs, "
                          "log_every >= 1; lr > 0; weight_decay, seed, checkpoint_every, keep_last >= 0");
    if (cfg.batch_size % cfg.micro_batches != 0)
      throw SettingsError("train.micro_batches (" + std::to_string(cfg.micro_batches) + ") must divide batch_size (" +
                          std::to_string(cfg.batch_size) + ")");
    if (world > 1) {
      if (cfg.batch_auto)
        throw SettingsError("--batch auto in a data-parallel run: the ranks would measure apart; set --batch (the "
                            "global batch, split between " + std::to_string(world) + " ranks)");
      if (*rt.context().config().autotune)
        throw SettingsError("autotune in a data-parallel run: the ranks would tune apart; tune in one process first "
                            "(the decision is cached) or train with autotune = false");
      if (cfg.batch_size % (world * cfg.micro_batches) != 0)
        throw SettingsError("batch_size " + std::to_string(cfg.batch_size) + " does not split into " +
                            std::to_string(world) + " ranks x " + std::to_string(cfg.micro_batches) +
                            " micro-batches");
    }
    teacher = make_mlp(cfg, teacher_width(cfg));
    init_mlp(teacher, stream_seed(cfg.seed, Stream::teacher), true);
    for (auto& p : teacher->parameters()) p.requires_grad_(false);
    rt.prepare(*teacher);
    teacher->eval();
    if (*rt.context().config().autotune) tune();
    if (cfg.batch_auto) find_batch(on_batch_trial);
    fresh();
  }

  // --batch auto: the largest batch of this student that fits the device's memory, measured
  // with real steps after the tuner chose the precision (which the memory depends on); with a
  // batch the user set, the micro-batches that reach it.
  void find_batch(const std::function<void(const BatchTrial&)>& on_trial) {
    torch::nn::Sequential probe = new_student();
    BatchProblem problem;
    describe_problem(problem, probe);
    problem.make_batch = [this](std::int64_t b) {
      auto gen = at::detail::createCPUGenerator(stream_seed(cfg.seed, Stream::data, 0));
      return label(at::randn({b, cfg.width}, gen, at::TensorOptions().dtype(at::kFloat)).to(rt.device()));
    };
    problem.forwards = forwards;
    BatchSearchOptions options;
    if (cfg.batch_max > 0) options.max = cfg.batch_max;
    if (cfg.batch_size_set) options.target_effective_batch = cfg.batch_size;
    options.progress = on_trial;
    if (cfg.micro_batches != 1)
      spdlog::warn("--batch auto: the batch-size finder sets the gradient-accumulation steps; train.micro_batches = {} "
                   "is not used", cfg.micro_batches);
    batch_decision = accelkit::find_batch_size(rt, problem, options);
    cfg.batch_size = batch_decision->effective;
    cfg.micro_batches = batch_decision->accumulation;
  }

  // Profile auto: the tuner times the candidates on a student of this shape and the first
  // micro-batch (or takes the cached decision); fresh() then builds with the chosen settings.
  void tune() {
    torch::nn::Sequential probe = new_student();
    auto [x, y] = batch(0);
    TuneProblem problem;
    describe_problem(problem, probe);
    problem.input = x.chunk(cfg.micro_batches)[0];
    problem.target = y.chunk(cfg.micro_batches)[0];
    accelkit::autotune(rt, problem);
  }

  // A student of the config's shape, initialised from the seed, on the device, in training
  // mode: the one trained (fresh) or a probe for the tuner and the batch-size finder.
  torch::nn::Sequential new_student() {
    torch::nn::Sequential mlp = make_mlp(cfg, cfg.width);
    init_mlp(mlp, stream_seed(cfg.seed, Stream::student), false);
    rt.prepare(*mlp);
    mlp->train();
    return mlp;
  }

  // What the tuner and the batch-size finder train: `probe` on the MSE loss, with the config's
  // AdamW settings.
  template <typename Problem>
  void describe_problem(Problem& problem, torch::nn::Sequential& probe) const {
    problem.name = "train " + mlp_name(cfg);
    problem.model = probe.ptr().get();
    problem.forward = [&probe](const at::Tensor& in) { return probe->forward(in); };
    problem.loss = [](const at::Tensor& out, const at::Tensor& target) { return torch::mse_loss(out, target); };
    problem.adamw.lr = cfg.lr;
    problem.adamw.weight_decay = cfg.weight_decay;
  }

  // A new student, optimizer and loss scaler at step 0.
  void fresh() {
    student = new_student();
    if (world > 1) dp = std::make_unique<DataParallel>(rt, group, *student);  // before the optimizer's copies
    AdamWConfig adamw;
    adamw.lr = cfg.lr;
    adamw.weight_decay = cfg.weight_decay;
    // Every forward of the student runs in this loop under the plan's autocast: master_weights
    // = auto may give it bf16 weights (unless a resumed checkpoint holds fp32 ones).
    opt = rt.make_adamw(student->parameters(), adamw, /*model_weights=*/true, forwards);
    scaler = rt.make_loss_scaler();
    if (dp) dp->attach(scaler);
    accumulator = std::make_unique<GradAccumulator>(static_cast<int>(cfg.micro_batches));
    step = 0;
  }

  // The input of step `index`, on the CPU: the same in every run with this seed. The data
  // pipeline's part of a step (the Prefetcher runs it on its thread).
  at::Tensor input(std::int64_t index) const {
    auto gen = at::detail::createCPUGenerator(stream_seed(cfg.seed, Stream::data, static_cast<std::uint64_t>(index)));
    return at::randn({cfg.batch_size, cfg.width}, gen, at::TensorOptions().dtype(at::kFloat));
  }

  // The batch of step `index`: the same on every device and in every run with this seed.
  std::pair<at::Tensor, at::Tensor> batch(std::int64_t index) { return label(input(index).to(rt.device())); }

  // The input (on the device) and the teacher's targets for it.
  std::pair<at::Tensor, at::Tensor> label(const at::Tensor& x) {
    torch::NoGradGuard no_grad;
    // The teacher in fp32 whatever autocast the precision plan switched on for this thread.
    compat::AutocastGuard fp32(rt.device().type(), false, compat::autocast_dtype(rt.device().type()));
    at::Tensor y = teacher->forward(x);
    return {x, y};
  }

  // One optimizer step over micro_batches micro-batches; returns the mean loss (detached,
  // on the device).
  at::Tensor train_step(const at::Tensor& input_on_device) {
    const std::int64_t shard = cfg.batch_size / world;  // this rank's rows of the batch
    auto [x, y] = label(world > 1 ? input_on_device.narrow(0, rank * shard, shard) : input_on_device);
    zero_grad(*opt.optimizer);
    auto xs = x.chunk(cfg.micro_batches);
    auto ys = y.chunk(cfg.micro_batches);
    at::Tensor total;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      at::Tensor loss;
      {
        // Off under an fp32 plan whatever this thread's autocast state (another runtime's plan
        // may have left it on), keeping the current dtype: Runtime::autocast() would ask
        // LibTorch 1.13 for an fp32 CPU autocast dtype, which it refuses.
        const bool on = rt.precision().autocast;
        compat::AutocastGuard autocast(rt.device().type(), on,
                                       on ? rt.autocast_dtype() : compat::autocast_dtype(rt.device().type()));
        at::Tensor out = student->forward(xs[i]);
        loss = torch::mse_loss(out.to(at::kFloat), ys[i]);
      }
      at::Tensor scaled = scaler.scale(accumulator->scale(loss));
      if (!dp) {
        scaled.backward();
      } else if (i + 1 < xs.size()) {
        auto local = dp->no_sync();  // accumulate; the last micro-batch's backward all-reduces the sum
        dp->backward(scaled);
      } else {
        dp->backward(scaled);
      }
      total = total.defined() ? total + loss.detach() : loss.detach();
      if (accumulator->boundary()) scaler.step(*opt.optimizer);
    }
    ++step;
    return cfg.micro_batches == 1 ? total : total / static_cast<double>(cfg.micro_batches);
  }

  std::string save_payload() const {
    torch::serialize::OutputArchive root;
    write_int(root, "meta_format", kCheckpointFormat);
    write_int(root, "meta_step", step);
    write_int(root, "meta_width", cfg.width);
    write_int(root, "meta_depth", cfg.depth);
    write_int(root, "meta_outputs", cfg.outputs);
    write_int(root, "meta_seed", cfg.seed);
    write_int(root, "meta_batch_size", cfg.batch_size);
    write_int(root, "meta_micro_batches", cfg.micro_batches);
    write_double(root, "meta_lr", cfg.lr);
    write_double(root, "meta_weight_decay", cfg.weight_decay);
    write_str(root, "meta_precision", describe(rt.precision()));
    write_str(root, "meta_optimizer", opt.implementation);
    write_int(root, "meta_master_weights", opt.master_weights ? 1 : 0);
    write_str(root, "meta_accelkit_version", ACCELKIT_VERSION_STRING);
    torch::serialize::OutputArchive model(root.compilation_unit());
    student->save(model);
    root.write("model", model);
    torch::serialize::OutputArchive optimizer(root.compilation_unit());
    opt.optimizer->save(optimizer);
    root.write("optimizer", optimizer);
    scaler.save(root);
    std::string bytes;
    root.save_to([&bytes](const void* data, std::size_t size) {
      bytes.append(static_cast<const char*>(data), size);
      return size;
    });
    return bytes;
  }

  // Refuses (TrainError) a checkpoint of another task; warns about changes that only make the
  // continuation differ from an uninterrupted run.
  void check_compatible(torch::serialize::InputArchive& root, const std::string& path, std::vector<std::string>& warnings) {
    const std::int64_t format = read_int(root, "meta_format");
    if (format != kCheckpointFormat)
      throw TrainError("checkpoint " + path + " has trainer format " + std::to_string(format) + ", this build reads " +
                       std::to_string(kCheckpointFormat));
    std::vector<std::string> differ;
    auto same = [&](const char* key, std::int64_t now) {
      const std::int64_t then = read_int(root, (std::string("meta_") + key).c_str());
      if (then != now)
        differ.push_back(std::string(key) + " = " + std::to_string(then) + " there, " + std::to_string(now) + " in the config");
    };
    same("width", cfg.width);
    same("depth", cfg.depth);
    same("outputs", cfg.outputs);
    same("seed", cfg.seed);
    if (!differ.empty())
      throw TrainError("checkpoint " + path + " belongs to a different run:" + join_lines(differ, "  ") +
                       "\nresume with the config it was written with, or set another checkpoint_dir");
    // The model's weights are bf16 (their fp32 master in the optimizer) or fp32: loading one
    // into the other would lose the master or change the model's dtype behind the optimizer.
    c10::IValue master;
    const bool then_master = root.try_read("meta_master_weights", master) && master.toInt() != 0;
    if (!then_master && opt.master_weights && *rt.context().config().master_weights == Toggle::automatic) {
      // auto follows the checkpoint: a run begun with fp32 weights continues with them.
      forwards = ForwardOwner::program;
      fresh();
      warnings.push_back("checkpoint " + path + " holds fp32 weights: master_weights = auto continues the run with them");
    }
    if (then_master != opt.master_weights) {
      auto held = [](bool m) { return m ? "bf16 weights with their fp32 master in the optimizer" : "fp32 weights"; };
      throw TrainError("checkpoint " + path + " holds " + held(then_master) + ", this run has " + held(opt.master_weights) +
                       "\nresume with master_weights = " + (then_master ? "on" : "off") +
                       " (the setting, or a profile that sets it), or set another checkpoint_dir");
    }
    auto note = [&](const char* key, std::int64_t now) {
      const std::int64_t then = read_int(root, (std::string("meta_") + key).c_str());
      if (then != now)
        warnings.push_back(std::string(key) + " changed from " + std::to_string(then) + " to " + std::to_string(now) +
                           " since " + path + "; the run continues, but not exactly as an uninterrupted one");
    };
    note("batch_size", cfg.batch_size);
    note("micro_batches", cfg.micro_batches);
    const std::string precision = read_str(root, "meta_precision");
    if (precision != describe(rt.precision()))
      warnings.push_back("precision changed from " + precision + " to " + describe(rt.precision()) + " since " + path);
  }

  // Loads a verified payload; TrainError for an incompatible checkpoint, c10::Error or
  // std::exception for an unreadable one (the state may then be half-loaded: call fresh()).
  void load_payload(const std::string& payload, const std::string& path, std::vector<std::string>& warnings) {
    torch::serialize::InputArchive root;
    root.load_from(payload.data(), payload.size(), rt.device());
    std::vector<std::string> notes;
    check_compatible(root, path, notes);
    const std::int64_t saved_step = read_int(root, "meta_step");
    if (saved_step < 0) throw std::runtime_error("negative step " + std::to_string(saved_step));
    torch::serialize::InputArchive model;
    root.read("model", model);
    student->load(model);
    torch::serialize::InputArchive optimizer;
    root.read("optimizer", optimizer);
    opt.optimizer->load(optimizer);
    scaler.load(root);
    // The config's hyper-parameters win (an optimizer may restore its saved options).
    for (auto& group : opt.optimizer->param_groups()) {
      group.options().set_lr(cfg.lr);
      if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&group.options())) adamw->weight_decay(cfg.weight_decay);
    }
    for (auto [key, now] : {std::pair<const char*, double>{"lr", cfg.lr}, {"weight_decay", cfg.weight_decay}}) {
      const double then = read_double(root, (std::string("meta_") + key).c_str());
      if (then != now) notes.push_back(std::string(key) + " changed from " + number(then) + " to " + number(now) + " since " + path);
    }
    step = saved_step;
    warnings.insert(warnings.end(), notes.begin(), notes.end());
  }
};

Trainer::Trainer(Runtime& runtime, TrainConfig config, std::function<void(const BatchTrial&)> on_batch_trial,
                 std::shared_ptr<dist::ProcessGroup> group)
    : state_(std::make_unique<State>(runtime, std::move(config), on_batch_trial, std::move(group))) {}
Trainer::~Trainer() = default;

const TrainConfig& Trainer::config() const noexcept { return state_->cfg; }
const std::optional<BatchDecision>& Trainer::batch_decision() const noexcept { return state_->batch_decision; }

std::vector<at::Tensor> Trainer::parameters() const { return state_->student->parameters(); }

// One call of Trainer::run: the checkpoint directory (resumed from, written to), the run's
// metrics and report, and the step loop. go() runs it; each member below does one part.
struct Trainer::State::Run {
  using Clock = std::chrono::steady_clock;

  Run(State& state, const TrainOptions& train_options)
      : s(state), cfg(state.cfg), options(train_options), writer(state.rank == 0) {}

  TrainResult go() {
    open_dir();
    const std::vector<CheckpointFile> existing = dir ? dir->list() : std::vector<CheckpointFile>{};
    if (options.resume) {
      resume(existing);
    } else if (!existing.empty()) {
      throw TrainError(dir->path() + " already holds checkpoints of a run (newest: step " +
                       std::to_string(existing.front().step) +
                       "); pass --resume to continue it, or remove them or set another checkpoint_dir to start over");
    }

    result.start_step = result.end_step = s.step;
    result.optimizer = s.opt.implementation;
    result.precision = describe(s.rt.precision());
    if (s.step >= cfg.steps) {
      warn("already at step " + std::to_string(s.step) + " of " + std::to_string(cfg.steps) + "; nothing to train");
      return std::move(result);
    }

    if (options.on_start) options.on_start(result);
    open_metrics();
    train();
    write_metrics();
    write_report();
    return std::move(result);
  }

 private:
  void warn(std::string msg) {
    spdlog::warn("{}", msg);
    result.warnings.push_back(std::move(msg));
  }

  // The checkpoint directory, when there is one; the writer locks it and removes what an
  // interrupted write left behind.
  void open_dir() {
    if (cfg.checkpoint_dir.empty()) return;
    dir.emplace(cfg.checkpoint_dir);
    if (!writer) return;
    dir->lock();
    for (const auto& stale : dir->remove_stale_temp_files())
      warn("removed " + stale + ", left by an interrupted checkpoint write");
  }

  // --resume: from the newest checkpoint that loads, passing over the unusable ones; TrainError
  // when none does.
  void resume(const std::vector<CheckpointFile>& existing) {
    if (!dir) {
      warn("resume asked for, but checkpoint_dir is empty (checkpoints are off); starting at step 0");
      return;
    }
    if (existing.empty()) {
      warn("resume asked for, but " + dir->path() + " holds no checkpoint; starting at step 0");
      return;
    }
    for (const auto& file : existing)
      if (load(file, &file == &existing.back())) break;
    if (!result.resumed_from) {
      std::vector<std::string> reasons;
      for (const auto& skip : result.skipped) reasons.push_back(skip.path + ": " + skip.reason);
      throw TrainError("no valid checkpoint to resume from in " + dir->path() + ":" + join_lines(reasons, "  ") +
                       "\nremove the damaged files to start over");
    }
  }

  // One checkpoint into the state: true when it loaded. An unreadable one is recorded as
  // skipped (the state fresh again); TrainError for one this run cannot continue from.
  bool load(const CheckpointFile& file, bool oldest) {
    std::vector<std::string> notes;
    try {
      s.load_payload(CheckpointDir::read(file.path), file.path, notes);
      result.resumed_from = file.path;
      for (auto& n : notes) warn(std::move(n));
      return true;
    } catch (const TrainError&) {
      throw;
    } catch (const std::exception& e) {  // CheckpointError, c10::Error: unreadable
      std::string reason = e.what();
      if (auto nl = reason.find('\n'); nl != std::string::npos) reason.resize(nl);  // c10 backtraces
      // LibTorch 1.13's reader restores CPU, CUDA and HPU tensors only: the checkpoint of a
      // new device type (PrivateUse1) is intact, this LibTorch cannot read it back.
      if (reason.find("however got PRIVATEUSEONE") != std::string::npos)
        throw TrainError("checkpoint " + file.path + " holds tensors of " + s.rt.device().str() + ", which LibTorch " +
                         std::string(TORCH_VERSION) + " cannot read back (" + reason + "); the files are intact: resume with an " +
                         "accelkit built against LibTorch >= 2.1, or train on another device");
      result.skipped.push_back({file.path, reason});
      warn("checkpoint " + file.path + " is unusable (" + reason + ")" +
           (!oldest ? "; falling back to the previous one" : ""));
      s.fresh();
      return false;
    }
  }

  void save() {
    const std::string path = dir->write(s.step, s.save_payload());
    result.saved.push_back(path);
    for (auto& gone : dir->prune(static_cast<std::size_t>(cfg.keep_last))) result.pruned.push_back(std::move(gone));
  }

  // The run's metrics (metrics.jsonl in the run directory, appended by every segment) and the
  // report made from them at the end. A failure to write them is a warning, never the end of
  // the training.
  void open_metrics() {
    if (!dir || !writer) return;
    try {
      keep_earlier_metrics_aside();
      RunSegment segment;
      segment.device = s.rt.device_handle()->info().id + " (" + s.rt.device_handle()->info().name + ")";
      segment.model = mlp_name(cfg);
      segment.precision = result.precision;
      segment.batch = cfg.batch_size;
      segment.start_step = result.start_step;
      metrics.emplace(dir->path(), segment);
      for (const auto& w : metrics->warnings()) warn(w);
      result.metrics_path = metrics->path();
    } catch (const std::exception& e) {
      warn(std::string("no metrics for this run: ") + e.what());
    }
  }

  // A fresh run does not continue another run's metrics: an earlier file is kept aside.
  void keep_earlier_metrics_aside() {
    namespace fs = std::filesystem;
    const fs::path earlier = fs::path(dir->path()) / "metrics.jsonl";
    std::error_code ec;
    if (result.resumed_from || !fs::exists(earlier, ec)) return;
    fs::path aside;
    for (int n = 1; aside.empty() || fs::exists(aside, ec); ++n)
      aside = fs::path(dir->path()) / ("metrics." + std::to_string(n) + ".jsonl");
    fs::rename(earlier, aside);
    warn("kept the metrics of an earlier run as " + aside.string() + "; this run starts a new metrics.jsonl");
  }

  void write_metrics() {
    if (!metrics) return;
    try {
      for (const StepMetrics& m : unwritten) metrics->write(m);
    } catch (const std::exception& e) {
      warn(std::string("metrics stop here: ") + e.what());
      metrics.reset();
    }
    unwritten.clear();
  }

  void write_report() {
    if (result.metrics_path.empty()) return;
    const std::string html = dir->path() + "/report.html";
    try {
      write_report_html(result.metrics_path, html);
      result.report_path = html;
    } catch (const std::exception& e) {
      warn(std::string("no report.html: ") + e.what());
    }
  }

  // The steps up to cfg.steps, or to a stop (signal, guard): each reported through
  // options.on_step, checkpointed as the config asks.
  void train() {
    const auto t0 = Clock::now();
    auto t1 = t0;  // end of the first step
    auto step_start = t0;
    // The inputs of the remaining steps, produced ahead on a background thread (prefetch = 0: in
    // the step) and delivered on the device.
    Prefetcher<at::Tensor> inputs(
        [&state = s, next = s.step, steps = cfg.steps]() mutable -> std::optional<at::Tensor> {
          if (next >= steps) return std::nullopt;
          return state.input(next++);
        },
        prefetch_options(s.rt));
    result.prefetch = static_cast<int>(inputs.options().depth);
    while (s.step < cfg.steps) {
      std::optional<at::Tensor> x = inputs.next();
      if (!x) throw TrainError("the input pipeline ended at step " + std::to_string(s.step));
      pending.push_back(s.train_step(*x));
      const auto step_end = Clock::now();
      const PrefetchStats data = inputs.stats();
      result.data_wait_ms = data.waited_ms;
      result.data_produce_ms = data.produce_ms;
      TrainProgress progress;
      progress.step_ms = std::chrono::duration<double, std::milli>(step_end - step_start).count();
      step_start = step_end;
      const bool guard_stop = watch_guard(progress);
      // A pause is not the step's time: the next step starts when the guard lets it.
      if (options.guard) step_start = Clock::now();
      if (auto memory = s.rt.device_handle()->memory(); memory.ok()) progress.memory_bytes = memory.value().in_use;
      const bool last = s.step == cfg.steps;
      const bool signalled = options.stop && options.stop->load();
      const bool stop = agree_to_stop(signalled, guard_stop);
      const bool log = s.step % cfg.log_every == 0 || last || stop;
      if (metrics) unwritten.push_back(step_metrics(progress));
      progress.step = s.step;
      progress.steps = cfg.steps;
      progress.first_step = result.start_step;
      progress.log = log;
      if (log) read_losses(progress);
      pace(progress, t0, t1);
      result.end_step = s.step;
      result.train_ms = progress.elapsed_s * 1e3;
      if (dir && writer && (last || stop || (cfg.checkpoint_every > 0 && s.step % cfg.checkpoint_every == 0))) save();
      if (options.on_step) options.on_step(progress);
      if (stop && !last) {
        result.interrupted = true;
        break;
      }
    }
  }

  // The guard's check after a step (it may pause the run): its new events and latest reading
  // into `progress`; whether it stops the run.
  bool watch_guard(TrainProgress& progress) {
    if (!options.guard) return false;
    const std::size_t before = options.guard->events().size();
    const bool guard_stop = options.guard->check(s.step, options.stop) == GuardAction::stop;
    std::vector<GuardEvent> events = options.guard->events();
    progress.guard_events.assign(events.begin() + static_cast<std::ptrdiff_t>(before), events.end());
    const GuardReading reading = options.guard->latest();
    progress.temperature_c = reading.temperature_c;
    progress.power_w = reading.power_w;
    if (guard_stop) result.guard_stopped = true;
    return guard_stop;
  }

  // Whether the run stops after this step. In a data-parallel run every rank stops after the
  // same step, or the others would wait for it: the ranks interrupted and the ranks their
  // guard stopped, agreed between all of them, go into the result.
  bool agree_to_stop(bool signalled, bool guard_stop) {
    if (s.world <= 1) return signalled || guard_stop;
    // Row 0: the ranks interrupted, row 1: the ranks their guard stopped; each rank its column.
    at::Tensor flags = at::zeros({2, s.world}, at::kDouble);
    flags[0][s.rank] = signalled ? 1.0 : 0.0;
    flags[1][s.rank] = guard_stop ? 1.0 : 0.0;
    std::vector<at::Tensor> all{flags};
    s.group->all_reduce_sum(all);
    const at::Tensor agreed = all[0].contiguous();
    const double* f = agreed.data_ptr<double>();
    for (int r = 0; r < s.world; ++r) {
      if (f[r] > 0) result.interrupted_ranks.push_back(r);
      if (f[s.world + r] > 0) result.guard_stopped_ranks.push_back(r);
    }
    const bool stop = !result.interrupted_ranks.empty() || !result.guard_stopped_ranks.empty();
    if (!result.guard_stopped_ranks.empty()) result.guard_stopped = true;
    return stop;
  }

  // The step's line of metrics.jsonl (its loss comes when it is read back: read_losses).
  StepMetrics step_metrics(const TrainProgress& progress) const {
    StepMetrics m;
    m.step = s.step;
    m.step_ms = progress.step_ms;
    m.samples_per_s = progress.step_ms > 0 ? static_cast<double>(cfg.batch_size) * 1e3 / progress.step_ms : 0;
    m.memory_bytes = progress.memory_bytes;
    m.temperature_c = progress.temperature_c;
    m.power_w = progress.power_w;
    for (const GuardEvent& e : progress.guard_events) m.events.push_back(e.kind + ": " + e.text);
    return m;
  }

  // The losses of the steps since the last log step, read back from the device (in a
  // data-parallel run the mean over the ranks' shards): into the unwritten metrics, which are
  // then written, and the result. TrainError when the loss diverged.
  void read_losses(TrainProgress& progress) {
    at::Tensor values = at::stack(pending).to(at::kCPU, at::kDouble);
    pending.clear();
    if (s.world > 1) {  // the loss of the whole batch: the mean of the ranks' shards
      std::vector<at::Tensor> all{values.contiguous()};
      s.group->all_reduce_sum(all);
      values = all[0] / static_cast<double>(s.world);
    }
    const double* v = values.data_ptr<double>();
    for (std::int64_t i = 0; i < values.numel() && i < static_cast<std::int64_t>(unwritten.size()); ++i)
      unwritten[static_cast<std::size_t>(static_cast<std::int64_t>(unwritten.size()) - values.numel() + i)].loss = v[i];
    write_metrics();
    for (std::int64_t i = 0; i < values.numel(); ++i) {
      if (!std::isfinite(v[i]) && !s.scaler.enabled())
        throw TrainError("the loss diverged (" + std::to_string(v[i]) + ") by step " + std::to_string(s.step) +
                         "; lower lr (now " + std::to_string(cfg.lr) + ")");
      result.losses.push_back(v[i]);
    }
    progress.loss = result.losses.back();
  }

  // Elapsed time, rate and time left into `progress`, from the start of the run (t0). The rate
  // leaves out the first step (warm-up: allocations, kernel selection): t1 becomes its end.
  void pace(TrainProgress& progress, Clock::time_point t0, Clock::time_point& t1) const {
    const auto now = Clock::now();
    progress.elapsed_s = std::chrono::duration<double>(now - t0).count();
    if (s.step == result.start_step + 1) t1 = now;
    const double since_first = std::chrono::duration<double>(now - t1).count();
    const auto done = static_cast<double>(s.step - result.start_step - 1);
    progress.steps_per_s = done > 0 && since_first > 0 ? done / since_first
                           : progress.elapsed_s > 0    ? 1 / progress.elapsed_s
                                                       : 0;
    progress.eta_s = progress.steps_per_s > 0 ? static_cast<double>(cfg.steps - s.step) / progress.steps_per_s : 0;
  }

  State& s;
  const TrainConfig& cfg;
  const TrainOptions& options;
  // In a data-parallel run rank 0 alone writes (checkpoints, metrics, report); every rank
  // reads the checkpoints to resume.
  const bool writer;
  TrainResult result;
  std::optional<CheckpointDir> dir;
  std::optional<MetricsWriter> metrics;
  std::vector<StepMetrics> unwritten;  // steps whose loss is still on the device
  std::vector<at::Tensor> pending;     // losses not yet read back from the device
};

TrainResult Trainer::run(const TrainOptions& options) { return State::Run(*state_, options).go(); }

}  // namespace accelkit
