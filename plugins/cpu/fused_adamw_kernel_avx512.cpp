// AVX-512 element loop (built with -mavx512f -mavx512bw; called only where the CPU has them):
// the shared vector loop on 16-float registers.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12 warns on the self-initialisation inside _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define ACCELKIT_ADAMW_AVX512 1
#include "fused_adamw_vector_loop.inc"

namespace accelkit::cpu::detail {

void adamw_avx512(const AdamWSpan& span, int64_t begin, int64_t end) { run_span(span, begin, end); }

}  // namespace accelkit::cpu::detail
