// FusedAdamW against torch::optim::AdamW: every ISA path, odd sizes, non-contiguous params,
// weight decay, amsgrad, maximize, param groups, bf16 params, checkpoints both ways.
// Inputs are fresh random numbers each run; the seed is printed on failure and can be fixed
// with ACCELKIT_TEST_SEED.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/serialize.h>

#include "torch_doctest.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "accelkit/sdk/torch_compat.hpp"
#include "fused_adamw.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace adamw_suite {

namespace {

using accelkit::cpu::AdamWIsa;
using accelkit::cpu::FusedAdamW;
using torch::optim::AdamW;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;
using torch::optim::OptimizerParamGroup;

uint64_t test_seed() {
  static const uint64_t seed = [] {
    if (const char* s = std::getenv("ACCELKIT_TEST_SEED")) return static_cast<uint64_t>(std::stoull(s));
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

std::vector<AdamWIsa> supported_isas() {
  std::vector<AdamWIsa> out;
  for (auto isa : {AdamWIsa::scalar, AdamWIsa::avx2, AdamWIsa::avx512})
    if (accelkit::cpu::adamw_isa_supported(isa)) out.push_back(isa);
  return out;
}

// ‖a − b‖ / max(‖b‖, scale) in double. `scale` is the size the rounding errors come from
// when b itself has cancelled towards zero (a single-element exp_avg at 1e-3 after 200
// steps of unit grads, a param that ended near 0): without it such a tensor fails on
// round-off alone, a few runs in a hundred.
double rel_err(const torch::Tensor& a, const torch::Tensor& b, double scale = 0) {
  const auto a64 = a.to(torch::kDouble), b64 = b.to(torch::kDouble);
  const double num = (a64 - b64).norm().item<double>();
  const double den = std::max(b64.norm().item<double>(), scale);
  return den == 0 ? num : num / den;
}

// All tensors as one flat vector, for whole-model measures.
torch::Tensor flat(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> parts;
  for (const auto& t : ts) parts.push_back(t.reshape({-1}).to(torch::kDouble));
  return torch::cat(parts);
}

AdamWParamState& state_of(torch::optim::Optimizer& opt, const torch::Tensor& p) {
  return static_cast<AdamWParamState&>(*opt.state().at(accelkit::compat::optimizer_state_key(opt.state(), p)));
}

// Sets the intra-op thread count for a scope.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : old_(at::get_num_threads()) { at::set_num_threads(n); }
  ~ScopedThreads() { at::set_num_threads(old_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int old_;
};

enum class Layout { contiguous, transposed, strided };

// A parameter's shape and memory layout: transposed is a .t() view of a contiguous 2-D
// tensor; strided is every other element (1-D) or a column slice (2-D), not dense.
struct Spec {
  std::vector<int64_t> shape;
  Layout layout = Layout::contiguous;
  bool transposed_grad = false;  // grads arrive as .t() views too
};

torch::Tensor make_base(const Spec& s, torch::Dtype dtype) {
  std::vector<int64_t> b = s.shape;
  if (s.layout == Layout::transposed) std::swap(b[0], b[1]);
  if (s.layout == Layout::strided) b.back() = b.size() == 1 ? 2 * b.back() : b.back() + 5;
  return torch::randn(b, torch::dtype(dtype));
}

torch::Tensor view_of(const torch::Tensor& base, const Spec& s) {
  switch (s.layout) {
    case Layout::contiguous: return base;
    case Layout::transposed: return base.t();
    case Layout::strided:
      return s.shape.size() == 1 ? base.slice(0, 0, base.size(0), 2) : base.slice(1, 0, s.shape[1]);
  }
  return base;
}

torch::Tensor make_grad(const Spec& s, torch::Dtype dtype) {
  if (s.transposed_grad && s.shape.size() == 2)
    return torch::randn({s.shape[1], s.shape[0]}, torch::dtype(dtype)).t();
  return torch::randn(s.shape, torch::dtype(dtype));
}

struct GroupSpec {
  std::vector<Spec> params;
  AdamWOptions options;
};

std::vector<OptimizerParamGroup> make_groups(const std::vector<GroupSpec>& groups,
                                             const std::vector<std::vector<torch::Tensor>>& params) {
  std::vector<OptimizerParamGroup> out;
  for (size_t i = 0; i < groups.size(); ++i)
    out.emplace_back(params[i], std::make_unique<AdamWOptions>(groups[i].options));
  return out;
}

// Runs `steps` steps of FusedAdamW (on `isa`) and of torch AdamW (fed -grad when maximizing)
// on identical params and grads; checks params and state within `tol` relative.
void compare_with_torch(const std::vector<GroupSpec>& groups, bool maximize, AdamWIsa isa, int steps, double tol) {
  std::vector<std::vector<torch::Tensor>> fused_params(groups.size()), ref_params(groups.size());
  std::vector<std::pair<const Spec*, std::pair<torch::Tensor, torch::Tensor>>> all;
  std::vector<double> init_norm;
  for (size_t i = 0; i < groups.size(); ++i) {
    for (const auto& s : groups[i].params) {
      const auto base = make_base(s, torch::kFloat);
      auto p = view_of(base, s);
      auto r = view_of(base.clone(), s);
      REQUIRE(p.strides() == r.strides());
      fused_params[i].push_back(p);
      ref_params[i].push_back(r);
      all.push_back({&s, {p, r}});
      init_norm.push_back(p.norm().item<double>());
    }
  }
  FusedAdamW fused(make_groups(groups, fused_params), AdamWOptions(), maximize);
  fused.set_isa(isa);
  AdamW ref(make_groups(groups, ref_params));
  for (int step = 0; step < steps; ++step) {
    for (auto& [spec, pr] : all) {
      const auto g = make_grad(*spec, torch::kFloat);
      pr.first.mutable_grad() = g;
      pr.second.mutable_grad() = maximize ? -g : g;
    }
    fused.step();
    ref.step();
  }
  // The whole model: ‖p − p_ref‖ / ‖p_ref‖ over all params.
  std::vector<torch::Tensor> ps, rs;
  for (auto& [spec, pr] : all) {
    ps.push_back(pr.first);
    rs.push_back(pr.second);
  }
  CHECK(rel_err(flat(ps), flat(rs)) <= tol);
  // Each tensor: the same, against at least its initial norm (params); the state against at
  // least sqrt(numel), the norm of the unit-variance grads it averages.
  for (size_t k = 0; k < all.size(); ++k) {
    const auto& [spec, pr] = all[k];
    CAPTURE(spec->shape);
    CAPTURE(static_cast<int>(spec->layout));
    const auto& [p, r] = pr;
    CHECK(p.strides() == r.strides());
    CHECK(rel_err(p, r, init_norm[k]) <= tol);
    auto& fs = state_of(fused, p);
    auto& ref_state = state_of(ref, r);
    const double unit = std::sqrt(static_cast<double>(p.numel()));
    CHECK(fs.step() == ref_state.step());
    CHECK(rel_err(fs.exp_avg(), ref_state.exp_avg(), unit) <= tol);
    CHECK(rel_err(fs.exp_avg_sq(), ref_state.exp_avg_sq(), unit) <= tol);
    if (ref_state.max_exp_avg_sq().defined())
      CHECK(rel_err(fs.max_exp_avg_sq(), ref_state.max_exp_avg_sq(), unit) <= tol);
  }
}

AdamWOptions opts(double lr, double wd, bool amsgrad = false) {
  return AdamWOptions(lr).weight_decay(wd).amsgrad(amsgrad);
}

// Tensor sizes that leave tails for every vector width and one that is split across threads.
std::vector<Spec> odd_sizes() { return {{{1}}, {{7}}, {{33}}, {{1023}}, {{65537}}}; }

std::vector<Spec> non_contiguous() {
  return {{{33, 31}, Layout::transposed},
          {{257, 255}, Layout::transposed, true},
          {{3, 5}, Layout::transposed},
          {{7}, Layout::strided},
          {{1023}, Layout::strided},
          {{64, 33}, Layout::strided},
          {{40001}, Layout::strided}};
}

constexpr int kSteps = 200;
constexpr double kTol = 1e-6;  // the bar: float round-off only, no drift

}  // namespace

TEST_CASE("isa selection and implementation()") {
  CHECK(accelkit::cpu::adamw_isa_supported(AdamWIsa::scalar));
  auto p = torch::zeros({4});
  {
    accelkit::test::ScopedEnv env("ACCELKIT_ADAMW_ISA", "scalar");
    FusedAdamW opt({p});
    CHECK(opt.isa() == AdamWIsa::scalar);
    CHECK(accelkit::test::contains(opt.implementation(), "fused AdamW (scalar, "));
  }
  {
    accelkit::test::ScopedEnv env("ACCELKIT_ADAMW_ISA", "sse9");
    CHECK_THROWS_WITH_AS(FusedAdamW({p}), doctest::Contains("ACCELKIT_ADAMW_ISA"), c10::Error);
  }
  {
    accelkit::test::ScopedEnv env("ACCELKIT_ADAMW_ISA", std::nullopt);
    FusedAdamW opt({p});
    const auto isas = supported_isas();
    CHECK(opt.isa() == isas.back());  // the best this CPU has
    ScopedThreads threads(2);
    const std::string impl = opt.implementation();
    MESSAGE(impl);
    CHECK(impl == std::string("fused AdamW (") + accelkit::cpu::adamw_isa_name(opt.isa()) + ", 2 threads)");
  }
}

TEST_CASE("matches torch::optim::AdamW after 200 steps on every ISA path") {
  const uint64_t seed = test_seed();
  INFO("seed ", seed, " (rerun with ACCELKIT_TEST_SEED=", seed, ")");
  // One thread: splitting across threads is checked bit for bit by the next test case; here
  // it would only make the reference's many small parallel regions spin on a busy machine.
  ScopedThreads threads(1);
  auto each_isa = [&](const std::vector<GroupSpec>& groups, bool maximize) {
    for (auto isa : supported_isas()) {
      const std::string isa_name = accelkit::cpu::adamw_isa_name(isa);
      CAPTURE(isa_name);
      torch::manual_seed(seed);
      compare_with_torch(groups, maximize, isa, kSteps, kTol);
    }
  };
  SUBCASE("odd sizes, weight decay") { each_isa({{odd_sizes(), opts(1e-3, 1e-2)}}, false); }
  SUBCASE("odd sizes, no weight decay, amsgrad") { each_isa({{odd_sizes(), opts(3e-3, 0, true)}}, false); }
  SUBCASE("non-contiguous params and grads") { each_isa({{non_contiguous(), opts(1e-2, 0.1)}}, false); }
  SUBCASE("maximize") { each_isa({{odd_sizes(), opts(1e-3, 1e-2, true)}}, true); }
  SUBCASE("param groups with their own options") {
    const auto third = AdamWOptions(5e-4).betas({0.8, 0.99}).eps(1e-6).weight_decay(0.05);
    each_isa({{{{{1023}}, {{33, 31}, Layout::transposed}}, opts(1e-2, 0.1)},
              {{{{65537}}, {{7}, Layout::strided}}, opts(1e-3, 0, true)},
              {{{{1}}, {{40, 50}}}, third}},
             false);
  }
}

// All paths perform the same float operations in the same order: equal bit for bit, whatever
// the thread count, for fp32 and bf16 params.
TEST_CASE("ISA paths and thread counts agree bit for bit") {
  const uint64_t seed = test_seed();
  INFO("seed ", seed, " (rerun with ACCELKIT_TEST_SEED=", seed, ")");
  std::vector<Spec> specs = odd_sizes();
  for (auto& s : non_contiguous()) specs.push_back(s);
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (bool amsgrad : {false, true}) {
      CAPTURE(dtype);
      CAPTURE(amsgrad);
      torch::manual_seed(seed);
      std::vector<torch::Tensor> bases;
      for (const auto& s : specs) bases.push_back(make_base(s, dtype));
      std::vector<std::vector<torch::Tensor>> grads(10);
      for (auto& step : grads)
        for (const auto& s : specs) step.push_back(make_grad(s, dtype));

      auto run = [&](AdamWIsa isa, int threads) {
        ScopedThreads scoped(threads);
        std::vector<torch::Tensor> params;
        for (size_t i = 0; i < specs.size(); ++i) params.push_back(view_of(bases[i].clone(), specs[i]));
        FusedAdamW opt(params, opts(1e-2, 0.1, amsgrad), /*maximize=*/amsgrad);
        opt.set_isa(isa);
        for (const auto& step : grads) {
          for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = step[i];
          opt.step();
        }
        std::vector<torch::Tensor> out;
        for (auto& p : params) {
          auto& st = state_of(opt, p);
          out.insert(out.end(), {p, st.exp_avg(), st.exp_avg_sq()});
          if (amsgrad) out.push_back(st.max_exp_avg_sq());
        }
        return out;
      };
      const auto expected = run(AdamWIsa::scalar, 1);
      for (auto isa : supported_isas()) {
        for (int threads : {1, 2}) {
          const std::string isa_name = accelkit::cpu::adamw_isa_name(isa);
    CAPTURE(isa_name);
          CAPTURE(threads);
          const auto got = run(isa, threads);
          REQUIRE(got.size() == expected.size());
          for (size_t i = 0; i < got.size(); ++i) {
            CAPTURE(i);
            CHECK((got[i].scalar_type() == expected[i].scalar_type()));
            CHECK(torch::equal(got[i], expected[i]));
          }
        }
      }
    }
  }
}

// bf16 params, float state. Reference: the same math in float64 from the same bf16 grads,
// rounding the param to bf16 after every step as the fused path does.
// - State (independent of the param): float vs float64 EMAs over 200 steps, ~1.4e-6 relative
//   measured; bound 1e-5 (against at least sqrt(numel), as in the fp32 comparison).
// - Param: it differs only where the float and float64 updates fall on either side of a bf16
//   rounding boundary; such an element is then about one bf16 ulp (2^-8 relative) off.
//   Measured over all ~68K elements: ~0.1% of elements, 1.3e-4 relative. Bounds, over all
//   elements (a 33-element tensor with one such element would be 3% on its own): at most
//   1% of elements, 2e-3 relative.
TEST_CASE("bf16 params with float state against a float64 reference") {
  const uint64_t seed = test_seed();
  INFO("seed ", seed, " (rerun with ACCELKIT_TEST_SEED=", seed, ")");
  ScopedThreads threads(1);
  for (auto isa : supported_isas()) {
    for (bool amsgrad : {false, true}) {
      const std::string isa_name = accelkit::cpu::adamw_isa_name(isa);
    CAPTURE(isa_name);
      CAPTURE(amsgrad);
      torch::manual_seed(seed);
      const double lr = 1e-2, wd = 0.1, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
      std::vector<Spec> specs = {{{1}}, {{33}}, {{1023}}, {{65537}}, {{33, 31}, Layout::transposed}};
      std::vector<torch::Tensor> params, ref_p;
      std::vector<torch::Tensor> m, v, vmax;
      for (const auto& s : specs) {
        auto p = view_of(make_base(s, torch::kBFloat16), s);
        params.push_back(p);
        ref_p.push_back(p.clone());
        m.push_back(torch::zeros(s.shape, torch::kDouble));
        v.push_back(torch::zeros(s.shape, torch::kDouble));
        vmax.push_back(torch::zeros(s.shape, torch::kDouble));
      }
      FusedAdamW opt(params, opts(lr, wd, amsgrad));
      opt.set_isa(isa);
      for (int step = 1; step <= kSteps; ++step) {
        const double bc1 = 1 - std::pow(beta1, step), bc2 = 1 - std::pow(beta2, step);
        for (size_t i = 0; i < specs.size(); ++i) {
          const auto g = make_grad(specs[i], torch::kBFloat16);
          params[i].mutable_grad() = g;
          const auto g64 = g.to(torch::kDouble);
          auto p64 = ref_p[i].to(torch::kDouble) * (1 - lr * wd);
          m[i] = beta1 * m[i] + (1 - beta1) * g64;
          v[i] = beta2 * v[i] + (1 - beta2) * g64 * g64;
          vmax[i] = torch::max(vmax[i], v[i]);
          const auto den = (amsgrad ? vmax[i] : v[i]).sqrt() / std::sqrt(bc2) + eps;
          ref_p[i] = (p64 - lr / bc1 * m[i] / den).to(torch::kBFloat16);
        }
        opt.step();
      }
      for (size_t i = 0; i < specs.size(); ++i) {
        CAPTURE(specs[i].shape);
        const auto& p = params[i];
        CHECK((p.scalar_type() == torch::kBFloat16));
        auto& st = state_of(opt, p);
        const double unit = std::sqrt(static_cast<double>(p.numel()));
        CHECK((st.exp_avg().scalar_type() == torch::kFloat));
        CHECK(rel_err(st.exp_avg(), m[i], unit) <= 1e-5);
        CHECK(rel_err(st.exp_avg_sq(), v[i], unit) <= 1e-5);
        if (amsgrad) CHECK(rel_err(st.max_exp_avg_sq(), vmax[i], unit) <= 1e-5);
      }
      const auto got = flat(params), want = flat(ref_p);
      CHECK((got != want).to(torch::kDouble).mean().item<double>() <= 0.01);
      CHECK(rel_err(got, want) <= 2e-3);
    }
  }
}

namespace {

// n steps of fresh grads for params (the same grads for every optimizer built from `seed`).
void train(torch::optim::Optimizer& opt, std::vector<torch::Tensor>& params, uint64_t seed, int steps) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (int s = 0; s < steps; ++s) {
    for (auto& p : params) p.mutable_grad() = at::randn(p.sizes(), gen, p.options());
    opt.step();
  }
}

std::vector<torch::Tensor> clone_all(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> out;
  for (const auto& t : ts) out.push_back(t.clone());
  return out;
}

// Saves `from` and loads it into `to` through a stream, as torch::save/torch::load do.
void save_load(const torch::optim::Optimizer& from, torch::optim::Optimizer& to) {
  std::stringstream buf;
  torch::save(from, buf);
  torch::load(to, buf);
}

}  // namespace

TEST_CASE("checkpoints move both ways between FusedAdamW and torch::optim::AdamW") {
  const uint64_t seed = test_seed();
  INFO("seed ", seed, " (rerun with ACCELKIT_TEST_SEED=", seed, ")");
  ScopedThreads threads(1);
  torch::manual_seed(seed);
  const std::vector<torch::Tensor> init = {torch::randn({1023}), torch::randn({65537}),
                                           torch::randn({31, 33}).t(), torch::randn({7})};
  for (bool amsgrad : {false, true}) {
    CAPTURE(amsgrad);
    const auto options = opts(1e-2, 0.1, amsgrad);
    // Uninterrupted reference: 100 steps of torch AdamW.
    auto ref_params = clone_all(init);
    AdamW ref(ref_params, options);
    train(ref, ref_params, seed + 1, 50);
    train(ref, ref_params, seed + 2, 50);

    SUBCASE("torch AdamW -> FusedAdamW") {
      auto params = clone_all(init);
      AdamW first(params, options);
      train(first, params, seed + 1, 50);
      auto resumed = clone_all(params);
      FusedAdamW second(resumed, options);
      save_load(first, second);
      train(second, resumed, seed + 2, 50);
      for (size_t i = 0; i < init.size(); ++i) {
        CHECK(rel_err(resumed[i], ref_params[i], init[i].norm().item<double>()) <= kTol);
        CHECK(state_of(second, resumed[i]).step() == 100);
        CHECK(rel_err(state_of(second, resumed[i]).exp_avg(), state_of(ref, ref_params[i]).exp_avg(),
                      std::sqrt(static_cast<double>(init[i].numel()))) <= kTol);
      }
    }
    SUBCASE("FusedAdamW -> torch AdamW") {
      auto params = clone_all(init);
      FusedAdamW first(params, options);
      train(first, params, seed + 1, 50);
      auto resumed = clone_all(params);
      AdamW second(resumed, options);
      save_load(first, second);
      for (size_t i = 0; i < init.size(); ++i)
        CHECK(state_of(second, resumed[i]) == state_of(first, params[i]));  // exact copy of the state
      train(second, resumed, seed + 2, 50);
      for (size_t i = 0; i < init.size(); ++i) {
        CHECK(rel_err(resumed[i], ref_params[i], init[i].norm().item<double>()) <= kTol);
        CHECK(state_of(second, resumed[i]).step() == 100);
      }
    }
    SUBCASE("FusedAdamW -> FusedAdamW resumes exactly") {
      auto straight = clone_all(init);
      FusedAdamW whole(straight, options);
      train(whole, straight, seed + 1, 50);
      train(whole, straight, seed + 2, 50);
      auto params = clone_all(init);
      FusedAdamW first(params, options);
      train(first, params, seed + 1, 50);
      auto resumed = clone_all(params);
      FusedAdamW second(resumed, options);
      save_load(first, second);
      train(second, resumed, seed + 2, 50);
      for (size_t i = 0; i < init.size(); ++i) CHECK(torch::equal(resumed[i], straight[i]));
    }
  }
}

TEST_CASE("a bf16 checkpoint of torch AdamW (bf16 state) is widened to float state") {
  torch::manual_seed(test_seed());
  std::vector<torch::Tensor> params = {torch::randn({100}).to(torch::kBFloat16)};
  AdamW first(params, opts(1e-2, 0.1));
  train(first, params, 1, 3);
  CHECK((state_of(first, params[0]).exp_avg().scalar_type() == torch::kBFloat16));
  auto resumed = clone_all(params);
  FusedAdamW second(resumed, opts(1e-2, 0.1));
  save_load(first, second);
  train(second, resumed, 2, 1);
  auto& st = state_of(second, resumed[0]);
  CHECK(st.step() == 4);
  CHECK((st.exp_avg().scalar_type() == torch::kFloat));
  CHECK((st.exp_avg_sq().scalar_type() == torch::kFloat));
}

TEST_CASE("params without grad are skipped; sparse grads and repeated params are refused; closure's loss returned") {
  auto a = torch::randn({10}), b = torch::randn({10});
  const auto b0 = b.clone();
  FusedAdamW opt({a, b});
  a.mutable_grad() = torch::randn({10});
  const auto loss = opt.step([] { return torch::ones({}) * 3; });
  CHECK(loss.item<float>() == 3.0f);
  CHECK(torch::equal(b, b0));
  CHECK(opt.state().size() == 1);

  b.mutable_grad() = torch::randn({10}).to_sparse();
  CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("sparse"), c10::Error);

  FusedAdamW twice({a, a});  // would be two concurrent updates of one buffer
  CHECK_THROWS_WITH_AS(twice.step(), doctest::Contains("more than once"), c10::Error);
}

TEST_CASE("other dtypes take the unfused path with the same math") {
  torch::manual_seed(test_seed());
  auto p = torch::randn({257}, torch::kDouble);
  auto r = p.clone();
  FusedAdamW fused({p}, opts(1e-2, 0.1, true), /*maximize=*/true);
  AdamW ref({r}, opts(1e-2, 0.1, true));
  for (int s = 0; s < 20; ++s) {
    const auto g = torch::randn({257}, torch::kDouble);
    p.mutable_grad() = g;
    r.mutable_grad() = -g;
    fused.step();
    ref.step();
  }
  CHECK(torch::equal(p, r));
  CHECK((state_of(fused, p).exp_avg().scalar_type() == torch::kDouble));
}

}  // namespace adamw_suite
