// The precision plan read back from LibTorch, each claimed dtype's numerics, routed operation
// classes and the claimed SDPA backends.
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "accelkit/sdk/torch_compat.hpp"
#include "check_util.hpp"

namespace accelkit::conformance::detail {
namespace {

std::string on_off(bool b) { return b ? "on" : "off"; }

// matmul, conv2d and an attention block on `run`'s device under whatever autocast the applied
// plan left on this thread, each against fp64 on the CPU.
struct OpOutcome {
  std::string op;
  at::ScalarType dtype;
  double error;
};

std::vector<OpOutcome> run_ops(const Run& run) {
  const bool q = run.options.quick;
  std::vector<OpOutcome> out;
  const int64_t n = q ? 128 : 256;
  // A square size, then one no kernel tiles evenly (tails, edge blocks).
  for (const auto& mkn : {std::array<int64_t, 3>{n, n, n}, std::array<int64_t, 3>{n + 1, n / 2 + 3, 37}}) {
    auto a = run.randn({mkn[0], mkn[1]}), b = run.randn({mkn[1], mkn[2]});
    auto y = at::matmul(a, b);
    out.push_back({"matmul " + std::to_string(mkn[0]) + "x" + std::to_string(mkn[1]) + "x" + std::to_string(mkn[2]),
                   y.scalar_type(), rel_error(y, at::matmul(a.to(at::kCPU, at::kDouble), b.to(at::kCPU, at::kDouble)))});
  }
  {
    const int64_t c = q ? 8 : 16, hw = q ? 16 : 32;
    auto x = run.randn({4, c, hw, hw}), w = run.randn({2 * c, c, 3, 3});
    auto y = at::conv2d(x, w, {}, 1, 1);
    out.push_back({"conv2d 3x3", y.scalar_type(),
                   rel_error(y, at::conv2d(x.to(at::kCPU, at::kDouble), w.to(at::kCPU, at::kDouble), {}, 1, 1))});
  }
  {
    // Projections scaled by 1/sqrt(D) so the attention scores are O(1): softmax stays smooth
    // and a rounding error cannot flip which key dominates.
    const int64_t t = q ? 32 : 64, d = 64;
    const Run& r = run;
    auto x = r.randn({2, t, d});
    std::vector<at::Tensor> w;
    for (int i = 0; i < 3; ++i) w.push_back(r.randn({d, d}) / std::sqrt(double(d)));
    auto head = [](const at::Tensor& v) { return v.unsqueeze(1); };  // [B, 1, T, D]
    auto y = compat::attention(head(at::linear(x, w[0])), head(at::linear(x, w[1])), head(at::linear(x, w[2])));
    auto xd = x.to(at::kCPU, at::kDouble);
    std::vector<at::Tensor> p;
    for (auto& wi : w) p.push_back(head(at::linear(xd, wi.to(at::kCPU, at::kDouble))));
    auto ref = at::matmul(at::softmax(at::matmul(p[0], p[1].transpose(-2, -1)) / std::sqrt(double(d)), -1), p[2]);
    out.push_back({"attention block (projections + softmax(qk^T)v)", y.scalar_type(), rel_error(y, ref)});
  }
  return out;
}

struct DtypeCase {
  const char* capability;
  std::optional<Dtype> precision;
  Toggle tf32;
  at::ScalarType expect;
  double tol;
  const char* why;
};

}  // namespace

void check_plan(const Run& run) {
  run.check("plan", "plan applied, read back from LibTorch", [&]() -> CheckResult {
    const PrecisionPlan plan = apply_request(run.device, run.options.request);
    std::vector<std::string> wrong;
    // LibTorch itself, whatever the plugin's read_back says.
    if (plan.threads > 0 && at::get_num_threads() != plan.threads)
      wrong.push_back("threads: plan " + std::to_string(plan.threads) + ", LibTorch runs " +
                      std::to_string(at::get_num_threads()));
    const auto type = run.dev.type();
    if (compat::autocast_available(type)) {
      const bool on = compat::autocast_enabled(type);
      if (on != plan.autocast)
        wrong.push_back("autocast: plan " + on_off(plan.autocast) + ", LibTorch has it " + on_off(on));
      else if (on && compat::autocast_dtype(type) != scalar_type(plan.dtype))
        wrong.push_back(std::string("autocast dtype: plan ") + to_string(plan.dtype) + ", LibTorch uses " +
                        dtype_name(compat::autocast_dtype(type)));
    }
    if (type == c10::kCUDA && at::globalContext().allowTF32CuBLAS() != plan.tf32)
      wrong.push_back("tf32: plan " + on_off(plan.tf32) + ", LibTorch has it " + on_off(!plan.tf32));
    // The plugin's own read-back, compared as `report --apply` does.
    auto precision = run.device.precision().value();
    auto read = precision->read_back();
    if (!read.ok()) return fail("read_back failed: " + read.status().message());
    int compared = 0;
    for (const auto& v : read.value()) {
      const auto intended = intended_value(v, plan);
      if (!intended) continue;
      ++compared;
      if (!same_value(*intended, v.value))
        wrong.push_back(v.key + ": plan " + *intended + ", read back " + v.value);
    }
    std::string what = "threads " + (plan.threads > 0 ? std::to_string(plan.threads) : "default") + ", autocast " +
                       (plan.autocast ? to_string(plan.dtype) : "off") + ", tf32 " + on_off(plan.tf32) + "; " +
                       std::to_string(compared) + " read-back value" + (compared == 1 ? "" : "s") + " compared";
    if (!wrong.empty()) {
      std::string d = "applied values differ from the plan: ";
      for (std::size_t i = 0; i < wrong.size(); ++i) d += (i ? "; " : "") + wrong[i];
      return fail(d, double(wrong.size()), 0.0);
    }
    return pass(what, 0.0, 0.0);
  });
}

void check_dtypes(const Run& run) {
  // Tolerances: relative Frobenius error against fp64, 8 unit roundoffs of the compute dtype -
  // the inputs and the output are each rounded once (3u) and blocked accumulation in that
  // dtype adds a few more; a wrong dtype or a wrong kernel is off by far more.
  const bool tf32 = run.claims(Capability::tf32);
  const DtypeCase cases[] = {
      {"fp32", Dtype::fp32, tf32 ? Toggle::off : Toggle::automatic, at::kFloat, 1e-5,
       "fp32: unit roundoff 6e-8, sums of K products grow it ~sqrt(K)"},
      {"tf32", Dtype::fp32, Toggle::on, at::kFloat, 8 * std::ldexp(1.0, -11), "tf32: 10-bit mantissa, 8 units of 4.9e-4"},
      {"bf16", Dtype::bf16, Toggle::automatic, at::kBFloat16, 8 * std::ldexp(1.0, -8), "bf16: 8 units of 3.9e-3"},
      {"fp16", Dtype::fp16, Toggle::automatic, at::kHalf, 8 * std::ldexp(1.0, -11), "fp16: 8 units of 4.9e-4"},
  };
  for (const auto& c : cases) {
    if (!run.info().capabilities.has(c.capability)) continue;
    run.check(c.capability, "matmul, conv2d, attention under the plan vs fp64", [&]() -> CheckResult {
      PrecisionRequest req = run.options.request;
      req.precision = c.precision;
      req.tf32 = c.tf32;
      const PrecisionPlan plan = apply_request(run.device, req);
      if (c.expect != at::kFloat && !(plan.autocast && plan.dtype == *c.precision))
        return fail(std::string("claims ") + c.capability + ", but its plan for precision=" + c.capability +
                    (plan.autocast ? std::string(" autocasts to ") + to_string(plan.dtype) : std::string(" has no autocast")));
      if (c.tf32 == Toggle::on && !plan.tf32) return fail("claims tf32, but its plan with tf32=on leaves it off");
      std::string d;
      double worst = 0;
      for (const auto& o : run_ops(run)) {
        if (o.dtype != c.expect)
          return fail(o.op + " returned " + dtype_name(o.dtype) + ", not " + dtype_name(c.expect) +
                      ": the plan's " + c.capability + " is not what runs (error vs fp64 " + num(o.error) + ")",
                      o.error, c.tol);
        if (!(o.error <= c.tol))
          return fail(o.op + ": error vs fp64 " + num(o.error) + " > " + num(c.tol) + " (" + c.why + ")", o.error, c.tol);
        worst = std::max(worst, o.error);
        d += (d.empty() ? "" : ", ") + o.op.substr(0, o.op.find(' ')) + " " + num(o.error);
      }
      return pass("outputs " + std::string(dtype_name(c.expect)) + "; error vs fp64 " + d + " <= " + num(c.tol) + " (" +
                      c.why + ")",
                  worst, c.tol);
    });
  }
  if (run.claims(Capability::fp8))
    run.skip("fp8", "fp8 matmul", "LibTorch's autocast has no fp8 dtype to apply; fp8 kernels are not checked by this version");
}

void check_routes(const Run& run) {
  const auto routes = run.options.routes.empty() ? resolve_routes(run.info(), {}) : run.options.routes;
  for (const auto& route : routes) {
    if (route.on_device) continue;
    const std::string cap = std::string(kRoutePrefix) + std::string(to_string(route.op));
    run.check(cap, "runs on " + route.device.str() + " and matches fp64", [&]() -> CheckResult {
      const Run& r = run;
      const auto x = r.randn({64, 64}).to(route.device);  // from the device to where the route sends it
      at::Tensor y, ref;
      const auto xd = x.to(at::kCPU, at::kDouble);
      double tol = 1e-5;
      switch (route.op) {
        case OpClass::fft:
          y = at::view_as_real(at::fft_fft(x));
          ref = at::view_as_real(at::fft_fft(xd));
          break;
        case OpClass::sort:
          y = std::get<0>(at::sort(x, -1));
          ref = std::get<0>(at::sort(xd, -1));
          break;
        case OpClass::scatter: {
          auto idx = at::randint(0, 16, {64, 64}, r.gen, at::TensorOptions().dtype(at::kLong));
          y = at::zeros({16, 64}, x.options()).scatter_add(0, idx.to(route.device), x);
          ref = at::zeros({16, 64}, xd.options()).scatter_add(0, idx, xd);
          break;
        }
        case OpClass::index: {
          auto idx = at::randint(0, 64, {32}, r.gen, at::TensorOptions().dtype(at::kLong));
          y = at::index_select(x, 0, idx.to(route.device));
          ref = at::index_select(xd, 0, idx);
          break;
        }
        case OpClass::cumsum:
          y = at::cumsum(x, -1);
          ref = at::cumsum(xd, -1);
          break;
        case OpClass::topk:
          y = std::get<0>(at::topk(x, 8, -1));
          ref = std::get<0>(at::topk(xd, 8, -1));
          break;
        case OpClass::linalg: {
          auto a = x + 64 * at::eye(64, x.options());  // diagonally dominant: condition number < 3
          y = at::linalg_solve(a, x);
          ref = at::linalg_solve(a.to(at::kCPU, at::kDouble), xd);
          tol = 1e-4;
          break;
        }
      }
      if (y.device() != route.device)
        return fail("ran on " + y.device().str() + ", the route says " + route.device.str());
      return judge("error vs fp64", rel_error(y, ref), tol, "fp32 arithmetic against fp64");
    });
  }
}

void check_sdpa(const Run& run) {
  const std::pair<Capability, const char*> claims[] = {{Capability::sdpa_flash, "flash"},
                                                       {Capability::sdpa_mem_efficient, "memory-efficient"}};
  for (const auto& [cap, name] : claims) {
    if (!run.claims(cap)) continue;
    const std::string key(to_string(cap));
    if (!compat::kSdpaControllable) {
      run.skip(key, std::string(name) + " attention", "this LibTorch has no SDPA backend switches (before 2.0)");
      continue;
    }
    run.check(key, std::string(name) + " attention alone, fp16, vs fp64", [&]() -> CheckResult {
      const Run& r = run;
      const auto before = compat::sdpa_backends();
      compat::SdpaBackends only{cap == Capability::sdpa_flash, cap == Capability::sdpa_mem_efficient, false};
      compat::set_sdpa_backends(only);
      compat::AutocastGuard fp16_as_given(r.dev.type(), false, at::kFloat);  // the inputs' own dtype
      at::Tensor y;
      std::vector<at::Tensor> qkv;
      try {
        for (int i = 0; i < 3; ++i) qkv.push_back(r.randn({2, 4, 128, 64}, at::kHalf));
        y = compat::attention(qkv[0], qkv[1], qkv[2]);
      } catch (...) {
        compat::set_sdpa_backends(before);
        throw;
      }
      compat::set_sdpa_backends(before);
      std::vector<at::Tensor> d;
      for (auto& t : qkv) d.push_back(t.to(at::kCPU, at::kDouble));
      auto ref = at::matmul(at::softmax(at::matmul(d[0], d[1].transpose(-2, -1)) / 8.0, -1), d[2]);
      return judge("error vs fp64", rel_error(y, ref), 8 * std::ldexp(1.0, -11), "fp16: 8 units of 4.9e-4");
    });
  }
}

}  // namespace accelkit::conformance::detail
