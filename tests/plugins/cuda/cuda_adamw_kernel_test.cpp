// The fused AdamW kernel through its plain C++ launcher and the CUDA runtime (no LibTorch):
// on fresh random data it must equal a host replica of the same float operations bit for bit
// (fp32 and bf16 params; nvcc builds it without FMA contraction, IEEE sqrt and division) and
// stay within float round-off of an fp64 reference. More tensors than one launch takes (48)
// and tensors of more than 256 chunks exercise the tensor lists and the block search.
// Skipped where no GPU is usable.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fused_adamw_launch.hpp"

using namespace accelkit::cuda;

namespace {

bool gpu_available() {
  static const bool ok = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
      std::printf("skipped: no GPU (cudaGetDeviceCount: %s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
      return false;
    }
    return true;
  }();
  return ok;
}

float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t{h} << 16); }
uint16_t float_to_bf16(float f) {
  if (f != f) return 0x7FC0;
  const uint32_t b = float_bits(f);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0) return (sign ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(man), -24);
  if (exp == 31) return bits_to_float(sign | 0x7F800000u | (man << 13));
  return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

struct Hyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
  bool amsgrad = false, maximize = false;
};

AdamWGroupConstants constants(const Hyper& h) {
  AdamWGroupConstants c{};
  c.decay = h.weight_decay != 0 ? static_cast<float>(1 - h.lr * h.weight_decay) : 1.0f;
  c.beta1 = static_cast<float>(h.beta1);
  c.one_minus_beta1 = static_cast<float>(1 - h.beta1);
  c.beta2 = static_cast<float>(h.beta2);
  c.one_minus_beta2 = static_cast<float>(1 - h.beta2);
  c.eps = static_cast<float>(h.eps);
  c.maximize = h.maximize;
  c.lr = h.lr;
  c.beta1_d = h.beta1;
  c.beta2_d = h.beta2;
  return c;
}

// The float replica: the kernel's operations in the kernel's order.
float replica(float p, float g, float& m, float& v, float& vmax, const AdamWGroupConstants& c, float neg_step,
              float sqrt_bc2, bool amsgrad) {
  if (c.maximize) g = -g;
  p = p * c.decay;
  m = m * c.beta1 + g * c.one_minus_beta1;
  v = v * c.beta2 + (c.one_minus_beta2 * g) * g;
  float d = v;
  if (amsgrad) {
    d = vmax > v ? vmax : v;
    vmax = d;
  }
  const float den = std::sqrt(d) / sqrt_bc2 + c.eps;
  return p + (neg_step * m) / den;
}

// fp64 AdamW, torch::optim::AdamW's formula.
double reference(double p, double g, double& m, double& v, double& vmax, const Hyper& h, long step) {
  if (h.maximize) g = -g;
  p *= 1 - h.lr * h.weight_decay;
  m = h.beta1 * m + (1 - h.beta1) * g;
  v = h.beta2 * v + (1 - h.beta2) * g * g;
  double d = v;
  if (h.amsgrad) d = vmax = std::max(vmax, v);
  const double bc1 = 1 - std::pow(h.beta1, step), bc2 = 1 - std::pow(h.beta2, step);
  return p - h.lr / bc1 * m / (std::sqrt(d) / std::sqrt(bc2) + h.eps);
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, host.size() * sizeof(T) + 1) == cudaSuccess);
  REQUIRE(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  return static_cast<T*>(p);
}
template <typename T>
std::vector<T> host_copy(const T* dev, std::size_t n) {
  std::vector<T> out(n);
  REQUIRE(cudaMemcpy(out.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return out;
}

enum class Kind { f32, bf16, f16 };

// Runs `steps` steps over tensors of `sizes` and checks every element.
void run_case(Kind kind, const std::vector<std::int64_t>& sizes, const Hyper& h, int steps, bool device_step,
              unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const AdamWGroupConstants c = constants(h);
  const std::size_t n = sizes.size();

  struct Tensor {
    std::vector<float> p_f;        // fp32 values (param as float, after rounding for bf16/f16)
    std::vector<uint16_t> p_h;     // bf16/f16 bits
    std::vector<double> p_ref, m_ref, v_ref, x_ref;
    std::vector<float> m, v, x;    // replica state
    void *p_dev = nullptr, *g_dev = nullptr;
    float *m_dev = nullptr, *v_dev = nullptr, *x_dev = nullptr, *step_dev = nullptr;
  };
  std::vector<Tensor> ts(n);
  const std::size_t elem = kind == Kind::f32 ? 4 : 2;
  for (std::size_t t = 0; t < n; ++t) {
    auto& T = ts[t];
    const auto sz = static_cast<std::size_t>(sizes[t]);
    T.p_f.resize(sz);
    T.p_h.resize(sz);
    for (std::size_t i = 0; i < sz; ++i) {
      float x = normal(rng);
      if (kind == Kind::bf16) {
        T.p_h[i] = float_to_bf16(x);
        x = bf16_to_float(T.p_h[i]);
      } else if (kind == Kind::f16) {  // a random normal half in [2^-5, 2^3)
        T.p_h[i] = static_cast<uint16_t>((rng() & 0x8000u) | ((10u + rng() % 8u) << 10) | (rng() & 0x3FFu));
        x = half_to_float(T.p_h[i]);
      }
      T.p_f[i] = x;
    }
    T.p_ref.assign(T.p_f.begin(), T.p_f.end());
    T.m_ref.assign(sz, 0.0);
    T.v_ref.assign(sz, 0.0);
    T.x_ref.assign(sz, 0.0);
    T.m.assign(sz, 0.0f);
    T.v.assign(sz, 0.0f);
    T.x.assign(sz, 0.0f);
    T.p_dev = kind == Kind::f32 ? static_cast<void*>(device_copy(T.p_f)) : static_cast<void*>(device_copy(T.p_h));
    REQUIRE(cudaMalloc(&T.g_dev, sz * elem + 1) == cudaSuccess);
    T.m_dev = device_copy(T.m);
    T.v_dev = device_copy(T.v);
    if (h.amsgrad) T.x_dev = device_copy(T.x);
    if (device_step) T.step_dev = device_copy(std::vector<float>{0.0f});
  }

  for (int step = 1; step <= steps; ++step) {
    const double bc1 = 1 - std::pow(h.beta1, step), bc2 = 1 - std::pow(h.beta2, step);
    const auto neg_step = static_cast<float>(-h.lr / bc1);
    const auto sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
    std::vector<AdamWTensorArgs> args(n);
    std::vector<std::vector<float>> grads(n);
    for (std::size_t t = 0; t < n; ++t) {
      auto& T = ts[t];
      const auto sz = T.p_f.size();
      grads[t].resize(sz);
      std::vector<uint16_t> gh(sz);
      for (std::size_t i = 0; i < sz; ++i) {
        float g = normal(rng) * 0.1f;
        if (kind == Kind::bf16) {
          gh[i] = float_to_bf16(g);
          g = bf16_to_float(gh[i]);
        } else if (kind == Kind::f16) {  // |g| in [2^-9, 2^-3)
          gh[i] = static_cast<uint16_t>((rng() & 0x8000u) | ((6u + rng() % 6u) << 10) | (rng() & 0x3FFu));
          g = half_to_float(gh[i]);
        }
        grads[t][i] = g;
      }
      if (kind == Kind::f32)
        REQUIRE(cudaMemcpy(T.g_dev, grads[t].data(), sz * 4, cudaMemcpyHostToDevice) == cudaSuccess);
      else
        REQUIRE(cudaMemcpy(T.g_dev, gh.data(), sz * 2, cudaMemcpyHostToDevice) == cudaSuccess);
      if (device_step) {
        const float s = static_cast<float>(step);
        REQUIRE(cudaMemcpy(T.step_dev, &s, 4, cudaMemcpyHostToDevice) == cudaSuccess);
      }
      AdamWTensorArgs& a = args[t];
      a.param = T.p_dev;
      a.grad = T.g_dev;
      a.exp_avg = T.m_dev;
      a.exp_avg_sq = T.v_dev;
      a.max_exp_avg_sq = T.x_dev;
      a.numel = static_cast<std::int64_t>(sz);
      a.neg_step_size = device_step ? 0.0f : neg_step;  // must come from the device step then
      a.sqrt_bias_correction2 = device_step ? 0.0f : sqrt_bc2;
      a.step = T.step_dev;
    }
    const AdamWDtype dtype = kind == Kind::f32 ? AdamWDtype::f32 : kind == Kind::bf16 ? AdamWDtype::bf16 : AdamWDtype::f16;
    const int err = launch_fused_adamw(dtype, c, args.data(), n, nullptr);
    REQUIRE_MESSAGE(err == 0, fused_adamw_error_string(err));
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

    for (std::size_t t = 0; t < n; ++t) {
      auto& T = ts[t];
      for (std::size_t i = 0; i < T.p_f.size(); ++i) {
        const float np = replica(T.p_f[i], grads[t][i], T.m[i], T.v[i], T.x[i], c, neg_step, sqrt_bc2, h.amsgrad);
        if (kind == Kind::bf16) T.p_f[i] = bf16_to_float(float_to_bf16(np));
        else T.p_f[i] = np;  // f16: compared against the fp64 reference below
        T.p_ref[i] = reference(T.p_ref[i], grads[t][i], T.m_ref[i], T.v_ref[i], T.x_ref[i], h, step);
      }
    }
  }

  // Compare: bitwise with the replica (fp32, bf16), and with fp64 within round-off.
  long mismatches = 0;
  double worst = 0;
  for (std::size_t t = 0; t < n; ++t) {
    auto& T = ts[t];
    const auto sz = T.p_f.size();
    std::vector<float> got(sz);
    if (kind == Kind::f32) {
      got = host_copy(static_cast<const float*>(T.p_dev), sz);
    } else {
      const auto bits = host_copy(static_cast<const uint16_t*>(T.p_dev), sz);
      for (std::size_t i = 0; i < sz; ++i) got[i] = kind == Kind::bf16 ? bf16_to_float(bits[i]) : half_to_float(bits[i]);
    }
    const auto m = host_copy(T.m_dev, sz);
    const auto v = host_copy(T.v_dev, sz);
    for (std::size_t i = 0; i < sz; ++i) {
      if (kind != Kind::f16 && (float_bits(got[i]) != float_bits(T.p_f[i]) || float_bits(m[i]) != float_bits(T.m[i]) ||
                                float_bits(v[i]) != float_bits(T.v[i])))
        ++mismatches;
      const double scale = std::max(1.0, std::fabs(T.p_ref[i]));
      worst = std::max(worst, std::fabs(got[i] - T.p_ref[i]) / scale);
    }
    cudaFree(T.p_dev);
    cudaFree(T.g_dev);
    cudaFree(T.m_dev);
    cudaFree(T.v_dev);
    if (T.x_dev) cudaFree(T.x_dev);
    if (T.step_dev) cudaFree(T.step_dev);
  }
  CHECK(mismatches == 0);
  // fp32 after a few steps: float round-off of p (2^-24 relative) plus the update's few ulps.
  // bf16/f16 params are rounded every step: half an ulp of the type per step at most.
  const double tolerance = kind == Kind::f32 ? 1e-6 : kind == Kind::bf16 ? steps * std::ldexp(1.0, -8) : steps * std::ldexp(1.0, -11);
  CHECK(worst <= tolerance);
  MESSAGE("max relative difference from fp64: " << worst << " (tolerance " << tolerance << ")");
}

std::vector<std::int64_t> many_sizes() {
  std::vector<std::int64_t> s{1, 3, 127, 4101, 65536, 65537, 300001};
  for (int i = 0; i < 60; ++i) s.push_back(17 + 97 * i);  // more tensors than one launch takes (48)
  return s;
}

}  // namespace

TEST_CASE("the launcher reports its architectures and ignores an empty list") {
  std::size_t count = 0;
  const int* archs = fused_adamw_archs(&count);
  REQUIRE(count > 0);
  for (std::size_t i = 0; i < count; ++i) CHECK(archs[i] >= 50);
  AdamWGroupConstants c{};
  CHECK(launch_fused_adamw(AdamWDtype::f32, c, nullptr, 0, nullptr) == 0);
}

TEST_CASE("without a usable GPU a launch returns an error instead of crashing") {
  if (gpu_available()) return;
  AdamWTensorArgs a{};
  a.numel = 10;
  a.sqrt_bias_correction2 = 1;
  const int err = launch_fused_adamw(AdamWDtype::f32, AdamWGroupConstants{}, &a, 1, nullptr);
  CHECK(err != 0);
  MESSAGE("launch without a GPU: " << std::string(fused_adamw_error_string(err)));
}

TEST_CASE("fp32 params, many tensors, weight decay" * doctest::skip(!gpu_available())) {
  run_case(Kind::f32, many_sizes(), Hyper{}, 5, false, 1);
}

TEST_CASE("fp32 amsgrad + maximize, no weight decay" * doctest::skip(!gpu_available())) {
  Hyper h;
  h.amsgrad = true;
  h.maximize = true;
  h.weight_decay = 0;
  h.lr = 3e-3;
  run_case(Kind::f32, many_sizes(), h, 5, false, 2);
}

TEST_CASE("tensors of more than 256 chunks in one launch" * doctest::skip(!gpu_available())) {
  run_case(Kind::f32, {256 * 65536 + 4099, 5, 300 * 65536 + 1}, Hyper{}, 2, false, 3);
}

TEST_CASE("device step counters give the host's bias corrections" * doctest::skip(!gpu_available())) {
  Hyper h;
  h.amsgrad = true;
  run_case(Kind::f32, many_sizes(), h, 6, true, 4);
}

TEST_CASE("bf16 params with fp32 state" * doctest::skip(!gpu_available())) {
  run_case(Kind::bf16, many_sizes(), Hyper{}, 5, false, 5);
}

TEST_CASE("fp16 params with fp32 state" * doctest::skip(!gpu_available())) {
  run_case(Kind::f16, many_sizes(), Hyper{}, 5, false, 6);
}
