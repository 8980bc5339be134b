// AVX-512 element loop (built with -mavx512f -mavx512bw; called only where the CPU has them).
// Same float operations, in the same order, as fused_adamw_kernel_scalar.cpp.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12 warns on the self-initialisation inside _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "fused_adamw_kernel.hpp"

namespace accelkit::cpu::detail {
namespace {

constexpr int64_t kWidth = 16;
// Elements ahead to prefetch: 1 KB of each float stream.
constexpr int64_t kPrefetch = 256;

struct Vec {
  __m512 decay, beta1, omb1, beta2, omb2, sbc2, eps, nss;
  __m512i sign;
  explicit Vec(const AdamWConstants& c)
      : decay(_mm512_set1_ps(c.decay)),
        beta1(_mm512_set1_ps(c.beta1)),
        omb1(_mm512_set1_ps(c.one_minus_beta1)),
        beta2(_mm512_set1_ps(c.beta2)),
        omb2(_mm512_set1_ps(c.one_minus_beta2)),
        sbc2(_mm512_set1_ps(c.sqrt_bias_correction2)),
        eps(_mm512_set1_ps(c.eps)),
        nss(_mm512_set1_ps(c.neg_step_size)),
        sign(_mm512_set1_epi32(static_cast<int>(c.grad_sign))) {}
};

inline __m512 load_bf16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Round to nearest even; NaN becomes 0x7FC0 (as c10::BFloat16).
inline void store_bf16(uint16_t* p, __m512 f) {
  const __m512i b = _mm512_castps_si512(f);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
}

// A hint for the line kPrefetch elements after x (computed as an integer: may be past the end).
template <typename T>
inline void prefetch(const T* x) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(x) + kPrefetch * sizeof(T)), _MM_HINT_T0);
}

template <bool Amsgrad>
inline __m512 update(__m512 p, __m512 g, float* m_ptr, float* v_ptr, float* vmax_ptr, const Vec& c) {
  g = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(g), c.sign));
  p = _mm512_mul_ps(p, c.decay);
  __m512 m = _mm512_loadu_ps(m_ptr);
  __m512 v = _mm512_loadu_ps(v_ptr);
  m = _mm512_add_ps(_mm512_mul_ps(m, c.beta1), _mm512_mul_ps(g, c.omb1));
  v = _mm512_add_ps(_mm512_mul_ps(v, c.beta2), _mm512_mul_ps(_mm512_mul_ps(c.omb2, g), g));
  _mm512_storeu_ps(m_ptr, m);
  _mm512_storeu_ps(v_ptr, v);
  __m512 d = v;
  if constexpr (Amsgrad) {
    d = _mm512_max_ps(_mm512_loadu_ps(vmax_ptr), v);
    _mm512_storeu_ps(vmax_ptr, d);
  }
  const __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(d), c.sbc2), c.eps);
  return _mm512_add_ps(p, _mm512_div_ps(_mm512_mul_ps(c.nss, m), den));
}

// Master: the update reads and writes the float master copy w and stores its bf16 rounding
// into the param (which it does not read).
template <bool Bf16, bool Amsgrad, bool Master>
void block(void* param, const void* grad, float* m, float* v, float* vmax, float* w, const Vec& c) {
  if constexpr (Master) {
    const __m512 r = update<Amsgrad>(_mm512_loadu_ps(w), load_bf16(static_cast<const uint16_t*>(grad)), m, v, vmax, c);
    _mm512_storeu_ps(w, r);
    store_bf16(static_cast<uint16_t*>(param), r);
  } else if constexpr (Bf16) {
    auto* p = static_cast<uint16_t*>(param);
    store_bf16(p, update<Amsgrad>(load_bf16(p), load_bf16(static_cast<const uint16_t*>(grad)), m, v, vmax, c));
  } else {
    auto* p = static_cast<float*>(param);
    _mm512_storeu_ps(p, update<Amsgrad>(_mm512_loadu_ps(p), _mm512_loadu_ps(static_cast<const float*>(grad)), m, v,
                                        vmax, c));
  }
}

template <bool Bf16, bool Amsgrad, bool Master>
void run(const AdamWSpan& s, int64_t begin, int64_t end) {
  using P = std::conditional_t<Bf16, uint16_t, float>;
  auto* p = static_cast<P*>(s.param);
  const auto* g = static_cast<const P*>(s.grad);
  float* m = s.exp_avg;
  float* v = s.exp_avg_sq;
  float* vmax = s.max_exp_avg_sq;
  float* w = s.master;
  const Vec c(s.c);
  int64_t i = begin;
  // 16 elements a trip: one cache line of each float stream, prefetched kPrefetch ahead
  // (prefetches past the end are harmless hints).
  for (; i + 16 <= end; i += 16) {
    prefetch(p + i);
    prefetch(g + i);
    prefetch(m + i);
    prefetch(v + i);
    if constexpr (Amsgrad) prefetch(vmax + i);
    if constexpr (Master) prefetch(w + i);
    block<Bf16, Amsgrad, Master>(p + i, g + i, m + i, v + i, Amsgrad ? vmax + i : nullptr,
                                 Master ? w + i : nullptr, c);
  }
  for (; i + kWidth <= end; i += kWidth)
    block<Bf16, Amsgrad, Master>(p + i, g + i, m + i, v + i, Amsgrad ? vmax + i : nullptr,
                                 Master ? w + i : nullptr, c);
  if (i == end) return;
  // Tail: through a zero-padded buffer so the last elements take the same vector path.
  const int64_t n = end - i;
  alignas(64) P tp[kWidth] = {};
  alignas(64) P tg[kWidth] = {};
  alignas(64) float tm[kWidth] = {}, tv[kWidth] = {}, tx[kWidth] = {}, tw[kWidth] = {};
  for (int64_t k = 0; k < n; ++k) {
    tp[k] = p[i + k];
    tg[k] = g[i + k];
    tm[k] = m[i + k];
    tv[k] = v[i + k];
    if constexpr (Amsgrad) tx[k] = vmax[i + k];
    if constexpr (Master) tw[k] = w[i + k];
  }
  block<Bf16, Amsgrad, Master>(tp, tg, tm, tv, tx, tw, c);
  for (int64_t k = 0; k < n; ++k) {
    p[i + k] = tp[k];
    m[i + k] = tm[k];
    v[i + k] = tv[k];
    if constexpr (Amsgrad) vmax[i + k] = tx[k];
    if constexpr (Master) w[i + k] = tw[k];
  }
}

}  // namespace

void adamw_avx512(const AdamWSpan& span, int64_t begin, int64_t end) {
  const bool ams = span.max_exp_avg_sq != nullptr;
  if (span.master)
    ams ? run<true, true, true>(span, begin, end) : run<true, false, true>(span, begin, end);
  else if (span.bf16)
    ams ? run<true, true, false>(span, begin, end) : run<true, false, false>(span, begin, end);
  else
    ams ? run<false, true, false>(span, begin, end) : run<false, false, false>(span, begin, end);
}

}  // namespace accelkit::cpu::detail
