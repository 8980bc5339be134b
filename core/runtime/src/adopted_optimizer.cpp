// The program's own optimizer, stepped by the runtime (adopted_optimizer.hpp).
#include "adopted_optimizer.hpp"

#include <stdexcept>
#include <typeinfo>
#include <utility>

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <c10/util/Type.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "accelkit/runtime.hpp"
#include "accelkit/sdk/torch_compat.hpp"

namespace accelkit::detail {

namespace {

using torch::optim::AdamOptions;
using torch::optim::AdamParamState;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;
using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

// The kind of `o` when its dynamic type is exactly T, or a subclass of it (`subclass` set).
template <class T>
bool is_kind(const torch::optim::Optimizer& o, bool& subclass) {
  if (typeid(o) == typeid(T)) return true;
  if (dynamic_cast<const T*>(&o) != nullptr) subclass = true;
  return false;
}

// The options type of each kind, and the engine's.
template <class Options>
const Options& options_as(const torch::optim::OptimizerParamGroup& g, const char* what) {
  const auto* o = dynamic_cast<const Options*>(&g.options());
  if (o == nullptr || typeid(*o) != typeid(Options))
    throw std::invalid_argument(std::string("a param group's options are not ") + what +
                                ": the fused step reads only those, so this optimizer cannot be stepped by it");
  return *o;
}

// Engine options from the program's (Adam: no decoupled decay; its L2 term goes into the grad).
void copy_options(const AdamOptions& u, AdamWOptions& e) {
  e.lr(u.lr()).betas(u.betas()).eps(u.eps()).weight_decay(0).amsgrad(u.amsgrad());
}
void copy_options(const AdamWOptions& u, AdamWOptions& e) {
  e.lr(u.lr()).betas(u.betas()).eps(u.eps()).weight_decay(u.weight_decay()).amsgrad(u.amsgrad());
}
void copy_options(const SGDOptions& u, SGDOptions& e) {
  e.lr(u.lr()).momentum(u.momentum()).dampening(u.dampening()).weight_decay(u.weight_decay()).nesterov(u.nesterov());
}

// A fresh options object of the engine's type for an added group.
std::unique_ptr<torch::optim::OptimizerOptions> engine_options(AdoptedKind kind, const torch::optim::OptimizerOptions& u) {
  if (kind == AdoptedKind::sgd) {
    auto e = std::make_unique<SGDOptions>(0.0);
    copy_options(static_cast<const SGDOptions&>(u), *e);
    return e;
  }
  auto e = std::make_unique<AdamWOptions>();
  if (kind == AdoptedKind::adam) copy_options(static_cast<const AdamOptions&>(u), *e);
  else copy_options(static_cast<const AdamWOptions&>(u), *e);
  return e;
}

// Moment tensors shared between a state of the program's type and one of the engine's.
// (Adam's and AdamW's states have the same fields.)
template <class From, class To>
void share_state(const From& from, To& to) {
  to.step(from.step()).exp_avg(from.exp_avg()).exp_avg_sq(from.exp_avg_sq()).max_exp_avg_sq(from.max_exp_avg_sq());
}
void share_state(const SGDParamState& from, SGDParamState& to) { to.momentum_buffer(from.momentum_buffer()); }

// The state of `p` in `map` as T; null where it has none; an error where it has another kind.
template <class T, class Map>
T* state_of(Map& map, const at::Tensor& p, const char* who) {
  auto it = map.find(compat::optimizer_state_key(map, p));
  if (it == map.end()) return nullptr;
  auto* s = dynamic_cast<T*>(it->second.get());
  if (s == nullptr)
    throw std::invalid_argument(std::string(who) + ": a parameter's state is not " + typeid(T).name() +
                                " (a checkpoint of another optimizer loaded into it?)");
  return s;
}

template <class T, class Map>
T& state_for(Map& map, const at::Tensor& p, const char* who) {
  if (T* s = state_of<T>(map, p, who)) return *s;
  auto made = std::make_unique<T>();
  T& ref = *made;
  map[compat::optimizer_state_key(map, p)] = std::move(made);
  return ref;
}

// Program -> engine before a step (a state the program loaded or replaced is the one to
// continue), engine -> program after it (the engine may have created or widened tensors).
template <class UserState, class EngineState>
void state_in_as(torch::optim::Optimizer& user, torch::optim::Optimizer& engine, const char* who) {
  for (auto& group : user.param_groups())
    for (auto& p : group.params()) {
      const UserState* u = state_of<UserState>(user.state(), p, who);
      if (u == nullptr) {
        engine.state().erase(compat::optimizer_state_key(engine.state(), p));
        continue;
      }
      share_state(*u, state_for<EngineState>(engine.state(), p, who));
    }
}

template <class UserState, class EngineState>
void state_out_as(torch::optim::Optimizer& user, torch::optim::Optimizer& engine, const char* who) {
  for (auto& group : user.param_groups())
    for (auto& p : group.params())
      if (const EngineState* e = state_of<EngineState>(engine.state(), p, who))
        share_state(*e, state_for<UserState>(user.state(), p, who));
}

// Puts the program's gradients back when the step ends (Adam's L2 term went into them).
struct GradsBack {
  std::vector<std::pair<at::Tensor, at::Tensor>> saved;  // (param, its own grad)
  ~GradsBack() {
    for (auto& [p, g] : saved) p.mutable_grad() = g;
  }
};

std::string kind_name(AdoptedKind kind) {
  switch (kind) {
    case AdoptedKind::adam: return "torch::optim::Adam";
    case AdoptedKind::adamw: return "torch::optim::AdamW";
    case AdoptedKind::sgd: return "torch::optim::SGD";
    case AdoptedKind::other: break;
  }
  return "an optimizer";
}

}  // namespace

AdoptedKind adopted_kind(const torch::optim::Optimizer& o, std::string& name) {
  bool subclass = false;
  AdoptedKind kind = AdoptedKind::other;
  if (is_kind<torch::optim::Adam>(o, subclass)) kind = AdoptedKind::adam;
  else if (is_kind<torch::optim::AdamW>(o, subclass)) kind = AdoptedKind::adamw;
  else if (is_kind<torch::optim::SGD>(o, subclass)) kind = AdoptedKind::sgd;
  if (kind != AdoptedKind::other) {
    name = kind_name(kind);
    return kind;
  }
  const std::string type = c10::demangle(typeid(o).name());
  if (subclass) {
    const char* base = dynamic_cast<const torch::optim::Adam*>(&o)    ? "torch::optim::Adam"
                       : dynamic_cast<const torch::optim::AdamW*>(&o) ? "torch::optim::AdamW"
                                                                       : "torch::optim::SGD";
    name = std::string("a subclass of ") + base + " (" + type + ")";
  } else {
    name = type;
  }
  return AdoptedKind::other;
}

AdoptedOptimizer::AdoptedOptimizer(torch::optim::Optimizer& optimizer, MakeEngine maker)
    : user_(optimizer), type_(&typeid(optimizer)), make_engine_(std::move(maker)),
      adoption_(std::make_unique<Adoption>()) {
  kind_ = adopted_kind(user_, adoption_->optimizer);
  if (kind_ == AdoptedKind::other) {
    adoption_->implementation = adoption_->optimizer + ", as it is";
    adoption_->why = adoption_->optimizer.rfind("a subclass", 0) == 0
                         ? "its step may not be its base class's update, so it steps as it is"
                         : "accelkit has no fused implementation of it (torch::optim's Adam, AdamW and SGD have one "
                           "where the device does), so it steps as it is";
    return;
  }
  make_engine();
}

AdoptedOptimizer::~AdoptedOptimizer() = default;

bool AdoptedOptimizer::adopts(const torch::optim::Optimizer& optimizer) const {
  return &optimizer == &user_ && typeid(optimizer) == *type_;
}

void AdoptedOptimizer::make_engine() {
  engine_.reset();
  built_over_.clear();
  auto& groups = user_.param_groups();
  const char* what = kind_ == AdoptedKind::adam ? "torch::optim::AdamOptions"
                     : kind_ == AdoptedKind::adamw ? "torch::optim::AdamWOptions"
                                                   : "torch::optim::SGDOptions";
  for (auto& g : groups) {
    if (kind_ == AdoptedKind::adam) options_as<AdamOptions>(g, what);
    else if (kind_ == AdoptedKind::adamw) options_as<AdamWOptions>(g, what);
    else options_as<SGDOptions>(g, what);
    built_over_.emplace_back();
    for (const auto& p : g.params()) built_over_.back().push_back(p.unsafeGetTensorImpl());
  }
  if (groups.empty()) throw std::invalid_argument(adoption_->optimizer + " with no param groups");
  OptimizerChoice choice = make_engine_(kind_, groups[0].params(), groups[0].options());
  adoption_->why = choice.why;
  const bool own = choice.implementation.rfind("torch::optim::", 0) == 0;
  adoption_->fused = !own;
  adoption_->implementation = own ? adoption_->optimizer + ", as it is" : choice.implementation + " on the optimizer's own state";
  if (own) return;
  engine_ = std::move(choice.optimizer);
  for (std::size_t i = 1; i < groups.size(); ++i)
    engine_->add_param_group(torch::optim::OptimizerParamGroup(groups[i].params(), engine_options(kind_, groups[i].options())));
}

bool AdoptedOptimizer::groups_changed() const {
  const auto& groups = user_.param_groups();
  if (groups.size() != built_over_.size()) return true;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& ps = groups[i].params();
    if (ps.size() != built_over_[i].size()) return true;
    for (std::size_t j = 0; j < ps.size(); ++j)
      if (ps[j].unsafeGetTensorImpl() != built_over_[i][j]) return true;
  }
  return false;
}

void AdoptedOptimizer::sync_options() {
  auto& ug = user_.param_groups();
  auto& eg = engine_->param_groups();
  for (std::size_t i = 0; i < ug.size(); ++i) {
    if (kind_ == AdoptedKind::sgd) {
      const auto& u = options_as<SGDOptions>(ug[i], "torch::optim::SGDOptions");
      if (u.nesterov() && (u.momentum() <= 0 || u.dampening() != 0))
        throw std::invalid_argument("torch::optim::SGD: a schedule set Nesterov momentum with momentum " +
                                    std::to_string(u.momentum()) + " and dampening " + std::to_string(u.dampening()) +
                                    " (Nesterov needs momentum > 0 and dampening 0)");
      copy_options(u, static_cast<SGDOptions&>(eg[i].options()));
      continue;
    }
    auto& e = static_cast<AdamWOptions&>(eg[i].options());
    const bool amsgrad_before = e.amsgrad();
    if (kind_ == AdoptedKind::adam) copy_options(options_as<AdamOptions>(ug[i], "torch::optim::AdamOptions"), e);
    else copy_options(options_as<AdamWOptions>(ug[i], "torch::optim::AdamWOptions"), e);
    if (e.amsgrad() != amsgrad_before && steps_ > 0)
      throw std::invalid_argument(adoption_->optimizer + ": a schedule switched amsgrad " +
                                  (e.amsgrad() ? "on" : "off") + " after " + std::to_string(steps_) +
                                  " steps; the fused step keeps amsgrad's maximum from the first step, so it cannot "
                                  "follow (set it when making the optimizer, or fused_optimizer = off)");
  }
}

void AdoptedOptimizer::state_in() {
  const char* who = adoption_->optimizer.c_str();
  if (kind_ == AdoptedKind::sgd) state_in_as<SGDParamState, SGDParamState>(user_, *engine_, who);
  else if (kind_ == AdoptedKind::adam) state_in_as<AdamParamState, AdamWParamState>(user_, *engine_, who);
  else state_in_as<AdamWParamState, AdamWParamState>(user_, *engine_, who);
}

void AdoptedOptimizer::state_out() {
  const char* who = adoption_->optimizer.c_str();
  if (kind_ == AdoptedKind::sgd) state_out_as<SGDParamState, SGDParamState>(user_, *engine_, who);
  else if (kind_ == AdoptedKind::adam) state_out_as<AdamParamState, AdamWParamState>(user_, *engine_, who);
  else state_out_as<AdamWParamState, AdamWParamState>(user_, *engine_, who);
}

at::Tensor AdoptedOptimizer::engine_step(const torch::optim::Optimizer::LossClosure& closure) {
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  GradsBack back;
  if (kind_ == AdoptedKind::adam) {
    at::NoGradGuard no_grad;
    for (auto& g : user_.param_groups()) {
      const double wd = static_cast<const AdamOptions&>(g.options()).weight_decay();
      if (wd == 0) continue;
      for (auto& p : g.params()) {
        if (!p.grad().defined()) continue;
        back.saved.emplace_back(p, p.grad());
        p.mutable_grad() = p.grad().add(p, wd);  // torch::optim::Adam's L2 term, as it computes it
      }
    }
  }
  engine_->step();
  return loss;
}

at::Tensor AdoptedOptimizer::step(const torch::optim::Optimizer::LossClosure& closure) {
  if (!engine_) {
    ++steps_;
    return closure ? user_.step(closure) : user_.step();
  }
  if (groups_changed()) make_engine();  // param groups added or replaced since
  if (!engine_) return step(closure);
  sync_options();
  state_in();
  at::Tensor loss = engine_step(closure);
  state_out();
  ++steps_;
  return loss;
}

AdoptedOptimizer* AdoptedOptimizers::find(const torch::optim::Optimizer& optimizer) {
  for (auto& a : list_)
    if (a->adopts(optimizer)) return a.get();
  return nullptr;
}

AdoptedOptimizer& AdoptedOptimizers::add(std::unique_ptr<AdoptedOptimizer> adopted) {
  for (auto& a : list_)
    if (&a->user() == &adopted->user()) {
      a = std::move(adopted);
      return *a;
    }
  list_.push_back(std::move(adopted));
  return *list_.back();
}

}  // namespace accelkit::detail
