// The portable path of the fused SGD (any CPU; fmaf is exact wherever it runs).
#include "fused_sgd_kernel.hpp"

#include "fused_sgd_loop.inc"

namespace accelkit::cpu::detail {

void sgd_scalar(const SGDSpan& s, int64_t begin, int64_t end) { run(s, begin, end); }

}  // namespace accelkit::cpu::detail
