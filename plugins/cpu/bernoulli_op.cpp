// The CPU plugin's aten::bernoulli_.float (bernoulli_op.hpp).
#include "bernoulli_op.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/DistributionsHelper.h>

#include <cmath>
#include <cstdint>
#include <mutex>

#include "bernoulli_kernel.hpp"

namespace accelkit::cpu::bernoulli {

namespace {

// The bit pattern of 1 in an element of `dtype`; 0 where the kernel does not take it.
uint64_t one_bits(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return 0x3F800000u;
    case at::kDouble: return 0x3FF0000000000000u;
    case at::kBFloat16: return 0x3F80u;
    case at::kHalf: return 0x3C00u;
    case at::kBool:
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong: return 1;
    default: return 0;
  }
}

// One 64-bit draw from the generator given, or LibTorch's default CPU one: the stream's key.
uint64_t draw_seed(const c10::optional<at::Generator>& generator) {
  auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(generator, at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return gen->random64();
}

// Element i's value where its number is below threshold: `one`, else 0, in `bytes` bytes.
void store(uint8_t* base, int bytes, int64_t i, bool set, uint64_t one) {
  const uint64_t v = set ? one : 0;
  switch (bytes) {
    case 1: base[i] = static_cast<uint8_t>(v); break;
    case 2: reinterpret_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(v); break;
    case 4: reinterpret_cast<uint32_t*>(base)[i] = static_cast<uint32_t>(v); break;
    default: reinterpret_cast<uint64_t*>(base)[i] = v; break;
  }
}

}  // namespace

bool fill(at::Tensor& self, double p, const c10::optional<at::Generator>& generator, bool avx512) {
#if defined(__x86_64__) || defined(_M_X64)
  const uint64_t one = one_bits(self.scalar_type());
  if (!(p >= 0.0 && p <= 1.0) || one == 0 || !self.device().is_cpu() || self.layout() != at::kStrided ||
      self.is_quantized() || !self.is_non_overlapping_and_dense())
    return false;
  const int64_t n = self.numel();
  if (n == 0) return true;
  if (p == 1.0) {  // every number is below 2^32
    self.fill_(1);
    return true;
  }
  const uint64_t seed = draw_seed(generator);
  const auto threshold = static_cast<uint32_t>(std::floor(p * 4294967296.0));  // p < 1: below 2^32
  const int bytes = static_cast<int>(self.element_size());
  // Dense without overlap: the elements are the n slots from the first one in memory (strides
  // a permutation of a contiguous tensor's); each slot takes its own element of the stream.
  auto* base = static_cast<uint8_t*>(self.data_ptr());
  const int64_t blocks = n / 32;
  at::parallel_for(0, blocks, 2048, [&](int64_t b0, int64_t b1) {
    uint8_t* dst = base + b0 * 32 * bytes;
    if (avx512) detail::bernoulli_blocks_avx512(dst, bytes, one, seed, b0, b1, threshold);
    else detail::bernoulli_blocks_avx2(dst, bytes, one, seed, b0, b1, threshold);
  });
  for (int64_t i = blocks * 32; i < n; ++i)
    store(base, bytes, i, detail::philox_element(seed, static_cast<uint64_t>(i)) < threshold, one);
  return true;
#else
  (void)self;
  (void)p;
  (void)generator;
  (void)avx512;
  return false;
#endif
}

}  // namespace accelkit::cpu::bernoulli
