// AVX2 element loop (built with -mavx2 -mfma; called only where the CPU has them): the
// shared vector loop on 8-float registers.
#define ACCELKIT_ADAMW_AVX512 0
#include "fused_adamw_vector_loop.inc"

namespace accelkit::cpu::detail {

void adamw_avx2(const AdamWSpan& span, int64_t begin, int64_t end) { run_span(span, begin, end); }

}  // namespace accelkit::cpu::detail
