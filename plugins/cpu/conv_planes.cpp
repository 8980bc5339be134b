// The NCHW form of the CPU plugin's GEMM path for convolutions, image by image (conv_planes.hpp).
//
// Both senses of a convolution pair an image (C planes of H x W; a transposed convolution's
// output) with its pixels (A channels at OH x OW; a plain convolution's output, a transposed
// one's input) through the weight as the matrix Wm [A, K], K = C*KH*KW in (c, kh, kw) order -
// the weight's own NCHW layout, [O, C, KH, KW] or [Cin, Ot, KH, KW]:
//   gather    pixels_n = Wm @ patches(image_n)          plain forward; transposed grad_input
//   scatter   image_n  = unpatch(Wm^T @ pixels_n)       plain grad_input; transposed forward
//   weight    Wm'     += pixels_n @ patches(image_n)^T  both
#include "conv_planes.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <new>
#include <vector>

namespace accelkit::cpu::conv_planes {

namespace {

using conv_gemm::Geometry;

// The Fortran BLAS entry point LibTorch's own CPU GEMM calls (column-major, arguments by address).
using Sgemm = void (*)(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc);

Sgemm sgemm() {
  static const Sgemm f = reinterpret_cast<Sgemm>(dlsym(RTLD_DEFAULT, "sgemm_"));
  return f;
}

// A task of at::parallel_for calls the BLAS on its own thread: MKL would otherwise start its own
// threads inside each task (measured: MNIST conv2's backward 0.97 ms on 2 threads, 0.60 ms with
// MKL held to one thread a task). MKL's thread-local setting where the process's BLAS is MKL;
// OpenBLAS's OpenMP build runs one thread inside a parallel region by itself. Outside a parallel
// region (one task) the BLAS keeps its threads.
class OneBlasThread {
 public:
  OneBlasThread() {
    if (set_local() != nullptr && at::in_parallel_region()) {
      previous_ = set_local()(1);
      set_ = true;
    }
  }
  ~OneBlasThread() {
    if (set_) set_local()(previous_);
  }
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  using SetLocal = int (*)(int);
  static SetLocal set_local() {
    static const SetLocal f = reinterpret_cast<SetLocal>(dlsym(RTLD_DEFAULT, "MKL_Set_Num_Threads_Local"));
    return f;
  }
  int previous_ = 0;
  bool set_ = false;
};

// Row-major C [M, N] = op(A) [M, K] @ op(B) [K, N] + beta * C, with op(X) = X^T where tX: the
// column-major product C^T = op(B)^T op(A)^T. The sizes fit in int: fit_any() bounds the patch
// matrix of the whole batch.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
          float beta, float* C, int64_t ldc) {
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  const int la = static_cast<int>(ldb), lb = static_cast<int>(lda), lc = static_cast<int>(ldc);
  const float one = 1.0f;
  sgemm()(tb ? "T" : "N", ta ? "T" : "N", &m, &n, &k, &one, B, &la, A, &lb, &beta, C, &lc);
}

// The output columns ow whose input column ow*stride + iw0 lies in [0, W): [lo, hi).
struct Span {
  int64_t lo = 0, hi = 0;
};
inline __attribute__((always_inline)) Span inside(int64_t iw0, int64_t stride, int64_t W, int64_t OW) {
  Span s;
  s.lo = iw0 >= 0 ? 0 : std::min<int64_t>(OW, (-iw0 + stride - 1) / stride);
  s.hi = iw0 > W - 1 ? 0 : std::min<int64_t>(OW, (W - 1 - iw0) / stride + 1);
  s.hi = std::max(s.hi, s.lo);
  return s;
}

// A 1x1 window at stride 1 without padding: an image's patches are its planes as they lie.
bool identity(const Geometry& g) {
  return g.KH == 1 && g.KW == 1 && g.stride[0] == 1 && g.stride[1] == 1 && g.pad[0] == 0 && g.pad[1] == 0;
}

// Copies n floats; runs are short (a window row's part inside the image), so no library call.
inline __attribute__((always_inline)) void copy_run(const float* src, int64_t n, float* dst) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
inline __attribute__((always_inline)) void zero_run(float* dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = 0.0f;
}

// The loops below are built twice on x86-64, for AVX2 and the baseline, and the loader picks one.
#if defined(__x86_64__) && defined(__GNUC__)
#define ACCELKIT_PLANES_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ACCELKIT_PLANES_CLONES
#endif

// The patches [K, P] of one image [C, H, W], rows `ld` apart: row (c, kh, kw) holds, for every
// output pixel, the image value its window puts there (0 outside the image). Runs of OW values
// per output row; the spans of the runs inside the image are the same for every c and kh.
ACCELKIT_PLANES_CLONES void patches(const float* img, const Geometry& g, float* cols, int64_t ld) {
  const int64_t KW = g.KW, OW = g.OW, OH = g.OH, sw = g.stride[1];
  Span span[16];
  int64_t iw0[16];
  for (int64_t kw = 0; kw < KW && kw < 16; ++kw) {
    iw0[kw] = kw * g.dil[1] - g.pad[1];
    span[kw] = inside(iw0[kw], sw, g.W, OW);
  }
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    // The output rows whose window row kh lies in the image: [oh_lo, oh_hi).
    const int64_t y0 = kh * g.dil[0] - g.pad[0];
    const Span rows = inside(y0, g.stride[0], g.H, OH);
    for (int64_t c = 0; c < g.C; ++c) {
      const float* plane = img + c * g.H * g.W;
      for (int64_t kw = 0; kw < KW; ++kw) {
        const int64_t x0 = kw < 16 ? iw0[kw] : kw * g.dil[1] - g.pad[1];
        const Span s = kw < 16 ? span[kw] : inside(x0, sw, g.W, OW);
        float* dst = cols + ((c * g.KH + kh) * KW + kw) * ld;
        zero_run(dst, rows.lo * OW);
        zero_run(dst + rows.hi * OW, (OH - rows.hi) * OW);
        if (rows.lo == rows.hi) continue;
        const float* src = plane + (rows.lo * g.stride[0] + y0) * g.W + x0;
        const int64_t src_step = g.stride[0] * g.W;
        float* out = dst + rows.lo * OW;
        if (sw == 1 && s.lo == 0 && s.hi == OW) {
          // The whole window row in the image: rows of OW values, nothing to zero.
          for (int64_t oh = rows.lo; oh < rows.hi; ++oh, src += src_step, out += OW) copy_run(src, OW, out);
          continue;
        }
        for (int64_t oh = rows.lo; oh < rows.hi; ++oh, src += src_step, out += OW) {
          zero_run(out, s.lo);
          if (sw == 1) {
            copy_run(src + s.lo, s.hi - s.lo, out + s.lo);
          } else {
            for (int64_t ow = s.lo; ow < s.hi; ++ow) out[ow] = src[ow * sw];
          }
          zero_run(out + s.hi, OW - s.hi);
        }
      }
    }
  }
}

// The inverse: one image [C, H, W] as the sum of its patches' values (rows `ld` apart) over the
// pixels they came from, in a fixed order.
ACCELKIT_PLANES_CLONES void unpatch(const float* cols, int64_t ld, const Geometry& g, float* img) {
  const int64_t KW = g.KW, OW = g.OW, OH = g.OH, sw = g.stride[1];
  zero_run(img, g.C * g.H * g.W);
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t y0 = kh * g.dil[0] - g.pad[0];
    const Span rows = inside(y0, g.stride[0], g.H, OH);
    if (rows.lo == rows.hi) continue;
    for (int64_t c = 0; c < g.C; ++c) {
      float* plane = img + c * g.H * g.W;
      for (int64_t kw = 0; kw < KW; ++kw) {
        const int64_t x0 = kw * g.dil[1] - g.pad[1];
        const Span s = inside(x0, sw, g.W, OW);
        const float* src = cols + ((c * g.KH + kh) * KW + kw) * ld + rows.lo * OW;
        float* row = plane + (rows.lo * g.stride[0] + y0) * g.W + x0;
        const int64_t row_step = g.stride[0] * g.W;
        for (int64_t oh = rows.lo; oh < rows.hi; ++oh, src += OW, row += row_step) {
          if (sw == 1) {
#pragma omp simd
            for (int64_t ow = s.lo; ow < s.hi; ++ow) row[ow] += src[ow];
          } else {
            for (int64_t ow = s.lo; ow < s.hi; ++ow) row[ow * sw] += src[ow];
          }
        }
      }
    }
  }
}

// Parts the weight and bias gradients are summed in (at most; fewer for fewer images).
constexpr int64_t kParts = 16;

struct Sizes {
  int64_t A, K, P, image;  // weight rows, patch length, pixels an image, an image's values
  int64_t block;           // images a product takes at once
};

// Images are taken a few at a time, so that a product has at least kColumns columns (a GEMM of
// 64 columns, one MNIST image's, runs at a fraction of its rate), as long as their patches stay
// within kBlockValues.
constexpr int64_t kColumns = 256;
constexpr int64_t kBlockValues = int64_t{1} << 18;  // 1 MiB of fp32

Sizes sizes(const at::Tensor& weight, const Geometry& g) {
  Sizes z{weight.size(0), g.patch(), g.OH * g.OW, g.C * g.H * g.W, 1};
  const int64_t by_columns = (kColumns + z.P - 1) / z.P;
  const int64_t by_memory = std::max<int64_t>(1, kBlockValues / std::max<int64_t>(1, std::max(z.K, z.A) * z.P));
  z.block = std::max<int64_t>(1, std::min({by_columns, by_memory, g.N}));
  return z;
}

// The pixels of images [n0, n0 + nb) (NCHW: [nb, A, P]) as one matrix [A, nb*P], and back.
void join(const float* pixels, int64_t n0, int64_t nb, const Sizes& z, float* m) {
  for (int64_t a = 0; a < z.A; ++a)
    for (int64_t i = 0; i < nb; ++i) copy_run(pixels + ((n0 + i) * z.A + a) * z.P, z.P, m + (a * nb + i) * z.P);
}
void split(const float* m, int64_t n0, int64_t nb, const Sizes& z, const float* bias, float* pixels) {
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t a = 0; a < z.A; ++a) {
      float* dst = pixels + ((n0 + i) * z.A + a) * z.P;
      const float* src = m + (a * nb + i) * z.P;
      if (bias == nullptr) {
        copy_run(src, z.P, dst);
      } else {
        const float b = bias[a];
#pragma omp simd
        for (int64_t p = 0; p < z.P; ++p) dst[p] = src[p] + b;
      }
    }
}

// The patches of images [n0, n0 + nb) side by side: [K, nb*P]. A 1x1 window at stride 1 without
// padding, one image: its planes as they lie (no copy).
const float* block_patches(const float* image, int64_t n0, int64_t nb, const Geometry& g, const Sizes& z,
                           float* cols) {
  if (nb == 1 && identity(g)) return image + n0 * z.image;
  for (int64_t i = 0; i < nb; ++i) patches(image + (n0 + i) * z.image, g, cols + i * z.P, nb * z.P);
  return cols;
}

// A task's scratch: patches or products of a few images, written before they are read (not
// zeroed first), 64-byte aligned as the BLAS likes its operands.
class Buffer {
 public:
  explicit Buffer(int64_t values)
      : p_(static_cast<float*>(::operator new[](static_cast<std::size_t>(std::max<int64_t>(values, 1)) * sizeof(float),
                                                std::align_val_t{64}))) {}
  ~Buffer() { ::operator delete[](p_, std::align_val_t{64}); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* data() const { return p_; }

 private:
  float* p_;
};

// fn(n0, nb, cols, pix) for each block of images [n0, n0 + nb), blocks in parallel, with the
// task's scratch for their patches (cols, [K, nb*P]) and pixels (pix, [A, nb*P]).
template <class Fn>
void each_block(const Geometry& g, const Sizes& z, const Fn& fn) {
  const int64_t blocks = (g.N + z.block - 1) / z.block;
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    const OneBlasThread serial;
    const Buffer cols(z.K * z.block * z.P), pix(z.A * z.block * z.P);
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t n0 = blk * z.block;
      fn(n0, std::min(z.block, g.N - n0), cols.data(), pix.data());
    }
  });
}

// pixels [N, A, P] = Wm @ patches(image_n) for every image, plus bias[a] on channel a where given.
void gather(const float* image, const float* wm, const float* bias, const Geometry& g, const Sizes& z, float* pixels) {
  each_block(g, z, [&](int64_t n0, int64_t nb, float* cols, float* pix) {
    const float* c = block_patches(image, n0, nb, g, z, cols);
    gemm(false, false, z.A, nb * z.P, z.K, wm, z.K, c, nb * z.P, 0.0f, pix, nb * z.P);
    split(pix, n0, nb, z, bias, pixels);
  });
}

// image_n = unpatch(Wm^T @ pixels_n) for every image.
void scatter(const float* pixels, const float* wm, const Geometry& g, const Sizes& z, float* image) {
  each_block(g, z, [&](int64_t n0, int64_t nb, float* cols, float* pix) {
    join(pixels, n0, nb, z, pix);
    gemm(true, false, z.K, nb * z.P, z.A, wm, z.K, pix, nb * z.P, 0.0f, cols, nb * z.P);
    for (int64_t i = 0; i < nb; ++i) unpatch(cols + i * z.P, nb * z.P, g, image + (n0 + i) * z.image);
  });
}

// Sums of each plane of image n of t [N, planes, count], in fp64, added to sums. Eight running
// sums a plane, added up at its end: one chain of fp64 adds would wait on each add's latency
// (MNIST conv1's bias gradient, 64x10x24x24: 0.5 ms a step that way).
ACCELKIT_PLANES_CLONES void plane_sums(const float* t, int64_t n, int64_t planes, int64_t count, double* sums) {
  for (int64_t c = 0; c < planes; ++c) {
    const float* p = t + (n * planes + c) * count;
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= count; i += 8)
      for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(p[i + k]);
    for (; i < count; ++i) acc[i % 8] += static_cast<double>(p[i]);
    sums[c] += ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  }
}

}  // namespace

bool available() { return sgemm() != nullptr; }

at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                   const Geometry& g) {
  const Sizes z = sizes(weight, g);
  const at::Tensor w = weight.contiguous();
  const at::Tensor x = input.contiguous();
  const bool with_bias = bias.has_value() && bias->defined();
  const at::Tensor b = with_bias ? bias->contiguous() : at::Tensor();
  const auto shape = g.output_shape();
  at::Tensor out = at::empty({shape[0], shape[1], shape[2], shape[3]}, input.options());
  if (!g.transposed) {
    gather(x.data_ptr<float>(), w.data_ptr<float>(), with_bias ? b.data_ptr<float>() : nullptr, g, z,
           out.data_ptr<float>());
    return out;
  }
  scatter(x.data_ptr<float>(), w.data_ptr<float>(), g, z, out.data_ptr<float>());
  if (with_bias) out.add_(b.view({1, -1, 1, 1}));
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                        const at::Tensor& weight, const Geometry& g,
                                                        std::array<bool, 3> output_mask) {
  const Sizes z = sizes(weight, g);
  const at::Tensor w = weight.contiguous();
  const at::Tensor x = input.contiguous();
  const at::Tensor go = grad_output.contiguous();
  // The image and the pixels of this convolution, and the gradient's side.
  const float* image = g.transposed ? go.data_ptr<float>() : x.data_ptr<float>();
  const float* pixels = g.transposed ? x.data_ptr<float>() : go.data_ptr<float>();
  const float* wm = w.data_ptr<float>();
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    grad_input = at::empty(input.sizes(), input.options());
    if (g.transposed)
      gather(image, wm, nullptr, g, z, grad_input.data_ptr<float>());
    else
      scatter(pixels, wm, g, z, grad_input.data_ptr<float>());
  }
  if (!output_mask[1] && !output_mask[2]) return {grad_input, grad_weight, grad_bias};
  // The weight and bias gradients by part: images [part*N/parts, (part+1)*N/parts) each.
  const int64_t parts = std::min<int64_t>(g.N, kParts);
  const int64_t bias_planes = g.transposed ? g.C : z.A, bias_count = g.transposed ? g.H * g.W : z.P;
  const float* bias_source = g.transposed ? image : pixels;
  at::Tensor weight_parts = output_mask[1] ? at::empty({parts, z.A, z.K}, weight.options()) : at::Tensor();
  std::vector<double> bias_parts(output_mask[2] ? static_cast<std::size_t>(parts * bias_planes) : 0, 0.0);
  at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    const OneBlasThread serial;
    const int64_t values = output_mask[1] ? z.block * z.P : 0;
    const Buffer cols(values * z.K), in(values * z.A);
    for (int64_t part = begin; part < end; ++part) {
      const int64_t first = part * g.N / parts, last = (part + 1) * g.N / parts;
      for (int64_t n = first; n < last; ++n)
        if (output_mask[2]) plane_sums(bias_source, n, bias_planes, bias_count, bias_parts.data() + part * bias_planes);
      if (!output_mask[1]) continue;
      for (int64_t n0 = first; n0 < last; n0 += z.block) {
        const int64_t nb = std::min(z.block, last - n0);
        const float* c = block_patches(image, n0, nb, g, z, cols.data());
        const float* p = pixels + n0 * z.A * z.P;
        if (nb > 1) {
          join(pixels, n0, nb, z, in.data());
          p = in.data();
        }
        gemm(false, true, z.A, z.K, nb * z.P, p, nb * z.P, c, nb * z.P, n0 == first ? 0.0f : 1.0f,
             weight_parts.data_ptr<float>() + part * z.A * z.K, z.K);
      }
    }
  });
  if (output_mask[1]) {
    grad_weight = at::empty(weight.sizes(), weight.options());
    const float* src = weight_parts.data_ptr<float>();
    float* dst = grad_weight.data_ptr<float>();
    const int64_t count = z.A * z.K;
    at::parallel_for(0, count, 4096, [&](int64_t begin, int64_t end) {
      std::copy(src + begin, src + end, dst + begin);
      for (int64_t part = 1; part < parts; ++part) {
        const float* add = src + part * count;
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) dst[i] += add[i];
      }
    });
  }
  if (output_mask[2]) {
    grad_bias = at::empty({bias_planes}, weight.options());
    float* dst = grad_bias.data_ptr<float>();
    for (int64_t c = 0; c < bias_planes; ++c) {
      double s = 0;
      for (int64_t part = 0; part < parts; ++part) s += bias_parts[static_cast<std::size_t>(part * bias_planes + c)];
      dst[c] = static_cast<float>(s);
    }
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace accelkit::cpu::conv_planes
