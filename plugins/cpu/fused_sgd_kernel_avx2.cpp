// The AVX2 + FMA path of the fused SGD: the same loops, vectorised with FMA instructions.
#include "fused_sgd_kernel.hpp"

#include "fused_sgd_loop.inc"

namespace accelkit::cpu::detail {

void sgd_avx2(const SGDSpan& s, int64_t begin, int64_t end) { run(s, begin, end); }

}  // namespace accelkit::cpu::detail
