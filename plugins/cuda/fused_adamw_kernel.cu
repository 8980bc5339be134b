// Fused multi-tensor AdamW: one launch updates a list of tensors. The tensor list and each
// tensor's first block travel in the kernel arguments (no host-to-device copy, so a launch can
// be captured in a CUDA graph); each block updates one 64K-element chunk of one tensor and
// finds its tensor by a binary search over the first blocks. A launch takes whole tensors, as
// many blocks as they have chunks: 104.9M parameters in 4 tensors are one launch of 1601
// blocks, not seven of 256 (each launch drains the GPU before the next fills it).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "fused_adamw_archs.h"
#include "fused_adamw_launch.hpp"

namespace accelkit::cuda {
namespace {

constexpr int kThreads = 512;
constexpr std::int64_t kChunk = 65536;
constexpr int kMaxTensors = 48;
constexpr int kIlp = 4;
// Blocks of one launch (the grid's x limit is 2^31 - 1): 2^30 chunks of 64K elements.
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 30;

struct TensorEntry {
  void* param;        // the param, or its fp32 master with Master
  const void* grad;
  void* model;        // with Master: the model's low-precision param, written from the master
  float* m;
  float* v;
  float* vmax;
  const float* step;
  std::int64_t numel;
  float neg_step_size;
  float sqrt_bc2;
};

// Kernel arguments: below the 4 KB parameter limit every architecture accepts.
struct LaunchArgs {
  TensorEntry tensors[kMaxTensors];
  int first_block[kMaxTensors];  // ascending; tensors[i] takes blocks first_block[i] ..
  int n_tensors;
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  unsigned int grad_sign;
  double lr, beta1_d, beta2_d;
};
static_assert(sizeof(LaunchArgs) <= 4096, "kernel arguments above 4 KB");

template <typename T> struct Io;
template <> struct Io<float> {
  __device__ static float load(const float* p, std::int64_t i) { return p[i]; }
  __device__ static void store(float* p, std::int64_t i, float x) { p[i] = x; }
};
template <> struct Io<__nv_bfloat16> {
  __device__ static float load(const __nv_bfloat16* p, std::int64_t i) {
    const unsigned short h = reinterpret_cast<const unsigned short*>(p)[i];
    return __uint_as_float(static_cast<unsigned int>(h) << 16);
  }
  // Round to nearest even; NaN -> 0x7FC0, as c10::BFloat16 and the CPU kernel do.
  __device__ static void store(__nv_bfloat16* p, std::int64_t i, float x) {
    const unsigned int bits = __float_as_uint(x);
    unsigned short out = static_cast<unsigned short>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
    if (x != x) out = 0x7FC0;
    reinterpret_cast<unsigned short*>(p)[i] = out;
  }
};
template <> struct Io<__half> {
  __device__ static float load(const __half* p, std::int64_t i) { return __half2float(p[i]); }
  __device__ static void store(__half* p, std::int64_t i, float x) { p[i] = __float2half_rn(x); }
};

// T: the grad's type, and the param's (without Master) or the model copy's (with Master, where
// the param is the fp32 master).
template <typename T, bool Amsgrad, bool Master>
__global__ void __launch_bounds__(kThreads) adamw_kernel(const LaunchArgs args) {
  const int block = static_cast<int>(blockIdx.x);
  int lo = 0, hi = args.n_tensors - 1;  // the last tensor whose first block is <= block
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (args.first_block[mid] <= block) lo = mid;
    else hi = mid - 1;
  }
  const TensorEntry& t = args.tensors[lo];
  const std::int64_t begin = static_cast<std::int64_t>(block - args.first_block[lo]) * kChunk;
  const std::int64_t end = begin + kChunk < t.numel ? begin + kChunk : t.numel;

  float neg_step_size = t.neg_step_size, sqrt_bc2 = t.sqrt_bc2;
  if (t.step) {  // device step: bias corrections as the host computes them (double, then float)
    const double s = static_cast<double>(*t.step);
    neg_step_size = static_cast<float>(-args.lr / (1.0 - pow(args.beta1_d, s)));
    sqrt_bc2 = static_cast<float>(sqrt(1.0 - pow(args.beta2_d, s)));
  }
  T* __restrict__ p = static_cast<T*>(t.param);
  float* __restrict__ master = static_cast<float*>(t.param);
  T* __restrict__ model = static_cast<T*>(t.model);
  const T* __restrict__ g = static_cast<const T*>(t.grad);
  float* __restrict__ m = t.m;
  float* __restrict__ v = t.v;
  float* __restrict__ vmax = t.vmax;

  // kIlp independent elements per thread per round, strided so each access is coalesced.
  for (std::int64_t base = begin + threadIdx.x; base < end; base += static_cast<std::int64_t>(kThreads) * kIlp) {
    float pr[kIlp], gr[kIlp], mr[kIlp], vr[kIlp], xr[kIlp];
#pragma unroll
    for (int k = 0; k < kIlp; ++k) {
      const std::int64_t i = base + static_cast<std::int64_t>(k) * kThreads;
      if (i < end) {
        pr[k] = Master ? master[i] : Io<T>::load(p, i);
        gr[k] = __uint_as_float(__float_as_uint(Io<T>::load(g, i)) ^ args.grad_sign);
        mr[k] = m[i];
        vr[k] = v[i];
        xr[k] = Amsgrad ? vmax[i] : 0.0f;
      }
    }
#pragma unroll
    for (int k = 0; k < kIlp; ++k) {
      const std::int64_t i = base + static_cast<std::int64_t>(k) * kThreads;
      if (i >= end) continue;
      float pi = pr[k] * args.decay;
      const float gi = gr[k];
      const float mi = mr[k] * args.beta1 + gi * args.one_minus_beta1;
      const float vi = vr[k] * args.beta2 + (args.one_minus_beta2 * gi) * gi;
      float d = vi;
      if (Amsgrad) {
        d = xr[k] > vi ? xr[k] : vi;
        vmax[i] = d;
      }
      const float den = sqrtf(d) / sqrt_bc2 + args.eps;
      pi = pi + (neg_step_size * mi) / den;
      if (Master) {
        master[i] = pi;
        Io<T>::store(model, i, pi);
      } else {
        Io<T>::store(p, i, pi);
      }
      m[i] = mi;
      v[i] = vi;
    }
  }
}

template <typename T, bool Master>
cudaError_t launch_one(const LaunchArgs& args, int blocks, bool amsgrad, cudaStream_t stream) {
  if (amsgrad)
    adamw_kernel<T, true, Master><<<blocks, kThreads, 0, stream>>>(args);
  else
    adamw_kernel<T, false, Master><<<blocks, kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launch(AdamWDtype dtype, bool master, const LaunchArgs& args, int blocks, bool amsgrad,
                   cudaStream_t stream) {
  switch (dtype) {
    case AdamWDtype::bf16:
      return master ? launch_one<__nv_bfloat16, true>(args, blocks, amsgrad, stream)
                    : launch_one<__nv_bfloat16, false>(args, blocks, amsgrad, stream);
    case AdamWDtype::f16:
      return master ? launch_one<__half, true>(args, blocks, amsgrad, stream)
                    : launch_one<__half, false>(args, blocks, amsgrad, stream);
    case AdamWDtype::f32: break;
  }
  return launch_one<float, false>(args, blocks, amsgrad, stream);
}

constexpr int kArchs[] = {ACCELKIT_CUDA_ARCH_LIST};

}  // namespace

int launch_fused_adamw(AdamWDtype dtype, const AdamWGroupConstants& c, const AdamWTensorArgs* tensors,
                       std::size_t count, void* stream_ptr) noexcept {
  if (count == 0) return 0;
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  const bool amsgrad = tensors[0].max_exp_avg_sq != nullptr;
  LaunchArgs args;
  std::memset(&args, 0, sizeof args);
  args.decay = c.decay;
  args.beta1 = c.beta1;
  args.one_minus_beta1 = c.one_minus_beta1;
  args.beta2 = c.beta2;
  args.one_minus_beta2 = c.one_minus_beta2;
  args.eps = c.eps;
  args.grad_sign = c.maximize ? 0x80000000u : 0u;
  args.lr = c.lr;
  args.beta1_d = c.beta1_d;
  args.beta2_d = c.beta2_d;

  // Whole tensors per launch, up to kMaxTensors of them or kMaxBlocks chunks.
  const bool master = tensors[0].model_param != nullptr;
  if (master && dtype == AdamWDtype::f32) return static_cast<int>(cudaErrorInvalidValue);
  std::int64_t n_blocks = 0;
  args.n_tensors = 0;
  auto flush = [&]() -> cudaError_t {
    if (args.n_tensors == 0) return cudaSuccess;
    const cudaError_t e = launch(dtype, master, args, static_cast<int>(n_blocks), amsgrad, stream);
    args.n_tensors = 0;
    n_blocks = 0;
    return e;
  };
  for (std::size_t ti = 0; ti < count; ++ti) {
    const AdamWTensorArgs& in = tensors[ti];
    if (in.numel <= 0) continue;
    if ((in.max_exp_avg_sq != nullptr) != amsgrad || (in.model_param != nullptr) != master)
      return static_cast<int>(cudaErrorInvalidValue);
    const std::int64_t chunks = (in.numel + kChunk - 1) / kChunk;
    if (chunks > kMaxBlocks) return static_cast<int>(cudaErrorInvalidValue);
    if (args.n_tensors == kMaxTensors || n_blocks + chunks > kMaxBlocks)
      if (cudaError_t e = flush(); e != cudaSuccess) return static_cast<int>(e);
    args.tensors[args.n_tensors] = TensorEntry{in.param, in.grad, in.model_param, in.exp_avg, in.exp_avg_sq,
                                               in.max_exp_avg_sq, in.step, in.numel, in.neg_step_size,
                                               in.sqrt_bias_correction2};
    args.first_block[args.n_tensors] = static_cast<int>(n_blocks);
    ++args.n_tensors;
    n_blocks += chunks;
  }
  if (cudaError_t e = flush(); e != cudaSuccess) return static_cast<int>(e);
  return 0;
}

const char* fused_adamw_error_string(int error) noexcept {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

const int* fused_adamw_archs(std::size_t* count) noexcept {
  *count = sizeof kArchs / sizeof kArchs[0];
  return kArchs;
}

}  // namespace accelkit::cuda
