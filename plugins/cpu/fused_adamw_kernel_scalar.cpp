// Portable element loop: the reference every vector path must match bit for bit.
#include <cmath>
#include <cstring>

#include "fused_adamw_kernel.hpp"

namespace accelkit::cpu::detail {
namespace {

inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even; NaN becomes the canonical quiet NaN (as c10::BFloat16). Branch-free
// so the loops vectorise.
inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const auto rounded = static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
  return f != f ? uint16_t{0x7FC0} : rounded;
}

inline float flip_sign(float f, uint32_t sign) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits ^= sign;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// One element; returns the new parameter value.
template <bool Amsgrad>
inline float update(float p, float g, float& m, float& v, float& vmax, const AdamWConstants& c) {
  g = flip_sign(g, c.grad_sign);
  p = p * c.decay;
  m = m * c.beta1 + g * c.one_minus_beta1;
  v = v * c.beta2 + (c.one_minus_beta2 * g) * g;
  float d = v;
  if constexpr (Amsgrad) {
    d = vmax > v ? vmax : v;
    vmax = d;
  }
  const float den = std::sqrt(d) / c.sqrt_bias_correction2 + c.eps;
  return p + (c.neg_step_size * m) / den;
}

// Master: the update reads and writes the float master copy and stores its bfloat16 rounding
// into the param (which it does not read).
template <bool Amsgrad, bool Master, typename P, typename Load, typename Store>
void run(const AdamWSpan& s, int64_t begin, int64_t end, Load load, Store store) {
  // Distinct buffers and local constants: the compiler may vectorise the loop for the target.
  P* __restrict p = static_cast<P*>(s.param);
  const P* __restrict g = static_cast<const P*>(s.grad);
  float* __restrict m = s.exp_avg;
  float* __restrict v = s.exp_avg_sq;
  float* __restrict vmax = s.max_exp_avg_sq;
  float* __restrict w = s.master;
  const AdamWConstants c = s.c;
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    float mi = m[i], vi = v[i], xi = Amsgrad ? vmax[i] : 0.0f;
    const float r = update<Amsgrad>(Master ? w[i] : load(p[i]), load(g[i]), mi, vi, xi, c);
    if constexpr (Master) w[i] = r;
    p[i] = store(r);
    m[i] = mi;
    v[i] = vi;
    if constexpr (Amsgrad) vmax[i] = xi;
  }
}

template <bool Amsgrad>
void run(const AdamWSpan& s, int64_t begin, int64_t end) {
  if (s.master)
    run<Amsgrad, true, uint16_t>(s, begin, end, bf16_to_float, float_to_bf16);
  else if (s.bf16)
    run<Amsgrad, false, uint16_t>(s, begin, end, bf16_to_float, float_to_bf16);
  else
    run<Amsgrad, false, float>(s, begin, end, [](float x) { return x; }, [](float x) { return x; });
}

}  // namespace

void adamw_scalar(const AdamWSpan& span, int64_t begin, int64_t end) {
  if (span.max_exp_avg_sq)
    run<true>(span, begin, end);
  else
    run<false>(span, begin, end);
}

}  // namespace accelkit::cpu::detail
