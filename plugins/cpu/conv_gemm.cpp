// The CPU plugin's GEMM path for convolutions (conv_gemm.hpp).
//
// A convolution seen from its output: every output pixel is one row of patch values (KH*KW*C of
// them in (kh, kw, c) order, zero where the window leaves the image) times the weights. So
//   forward            out_rows [N*OH*OW, O] = patches(input) @ weight^T
//   grad_weight        weight'  [O, KH*KW*C] = grad_rows^T @ patches(input)
//   grad_input         input'                = scatter(grad_rows @ weight)
// and a transposed convolution is the same with the roles of forward and grad_input swapped.
// out_rows is the output in channels-last order, so a channels-last program gets it as is and
// an NCHW one after one transpose copy of the output.
#include "conv_gemm.hpp"

#include <ATen/Parallel.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>

#include "accelkit/sdk/torch_compat.hpp"
#include "conv_planes.hpp"

namespace accelkit::cpu::conv_gemm {

// One value for both dimensions, or two; `empty` where the list is empty (output_padding).
bool read_pair(at::IntArrayRef v, int64_t empty, int64_t out[2]) {
  if (v.empty()) {
    out[0] = out[1] = empty;
    return true;
  }
  if (v.size() == 1) {
    out[0] = out[1] = v[0];
    return true;
  }
  if (v.size() != 2) return false;
  out[0] = v[0];
  out[1] = v[1];
  return true;
}

bool plain(const at::Tensor& t, at::ScalarType dtype) {
  return t.defined() && t.dim() == 4 && t.scalar_type() == dtype && t.device().is_cpu() &&
         t.layout() == at::kStrided && !t.is_quantized() && !t.is_mkldnn() && !t.is_neg() && !t.is_conj();
}

bool plain_fp32(const at::Tensor& t) { return plain(t, at::kFloat); }

namespace {

// The geometry of this convolution, or false where the arguments are not the ones fit_any() takes
// (LibTorch's kernel then says what is wrong with them, if anything).
bool geometry(const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a, Geometry& g) {
  if (!read_pair(a.stride, 1, g.stride) || !read_pair(a.padding, 0, g.pad) || !read_pair(a.dilation, 1, g.dil) ||
      !read_pair(a.output_padding, 0, g.out_pad))
    return false;
  for (int d = 0; d < 2; ++d)
    if (g.stride[d] < 1 || g.pad[d] < 0 || g.dil[d] < 1 || g.out_pad[d] < 0 ||
        (g.out_pad[d] != 0 && (!a.transposed || g.out_pad[d] >= g.stride[d])))
      return false;
  g.transposed = a.transposed;
  g.out_channels = weight.size(a.transposed ? 1 : 0);
  g.N = input.size(0);
  g.KH = weight.size(2);
  g.KW = weight.size(3);
  if (!a.transposed) {
    if (weight.size(1) != input.size(1)) return false;
    g.C = input.size(1);
    g.H = input.size(2);
    g.W = input.size(3);
    g.OH = (g.H + 2 * g.pad[0] - g.dil[0] * (g.KH - 1) - 1) / g.stride[0] + 1;
    g.OW = (g.W + 2 * g.pad[1] - g.dil[1] * (g.KW - 1) - 1) / g.stride[1] + 1;
    if (g.H + 2 * g.pad[0] < g.dil[0] * (g.KH - 1) + 1 || g.W + 2 * g.pad[1] < g.dil[1] * (g.KW - 1) + 1)
      return false;
  } else {
    if (weight.size(0) != input.size(1)) return false;
    g.C = weight.size(1);
    g.OH = input.size(2);
    g.OW = input.size(3);
    g.H = (g.OH - 1) * g.stride[0] - 2 * g.pad[0] + g.dil[0] * (g.KH - 1) + g.out_pad[0] + 1;
    g.W = (g.OW - 1) * g.stride[1] - 2 * g.pad[1] + g.dil[1] * (g.KW - 1) + g.out_pad[1] + 1;
  }
  return g.N > 0 && g.C > 0 && g.H > 0 && g.W > 0 && g.KH > 0 && g.KW > 0 && g.OH > 0 && g.OW > 0;
}

// The layout LibTorch's CPU kernel gives its results: channels-last where the input or the
// weight suggests it (LibTorch 1.x's kernel for transposed convolutions: NCHW always).
at::MemoryFormat result_format(const at::Tensor& input, const at::Tensor& weight, bool transposed) {
  if (transposed && !compat::kTransposedConvFollowsChannelsLast) return at::MemoryFormat::Contiguous;
  return input.suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
                 weight.suggest_memory_format() == at::MemoryFormat::ChannelsLast
             ? at::MemoryFormat::ChannelsLast
             : at::MemoryFormat::Contiguous;
}

// `image` ([N, C, H, W], any strides) as a channels-last tensor: itself where it is one already,
// else one copy. Patch rows then gather runs of C contiguous values.
at::Tensor pixels_last(const at::Tensor& image) { return image.contiguous(at::MemoryFormat::ChannelsLast); }

// The window positions kw in [lo, hi) of a window row starting at image column iw0 that fall
// inside the image (lo == hi where none do).
struct Span {
  int64_t lo = 0, hi = 0;
};
Span inside(int64_t iw0, const Geometry& g) {
  Span s;
  const int64_t d = g.dil[1];
  s.lo = iw0 >= 0 ? 0 : std::min<int64_t>(g.KW, (-iw0 + d - 1) / d);
  s.hi = iw0 >= g.W ? 0 : std::min<int64_t>(g.KW, (g.W - 1 - iw0) / d + 1);
  s.hi = std::max(s.hi, s.lo);
  return s;
}

// The rows [N*OH*OW, KH*KW*C] of patch values of `image` ([N, C, H, W]), each in (kh, kw, c)
// order: one run of C values a window position, zeros where it leaves the image. Without
// dilation a window row's positions are neighbours in a channels-last image, so the part of the
// row inside the image is one copy of up to KW*C values.
// T: float, or c10::BFloat16 for the bf16 weight gradient (values copied as they are).
template <class T>
at::Tensor patches_of(const at::Tensor& image, const Geometry& g) {
  const at::Tensor img = pixels_last(image);
  at::Tensor cols = at::empty({g.rows(), g.patch()}, image.options().memory_format(at::MemoryFormat::Contiguous));
  const T* src = img.data_ptr<T>();
  T* dst = cols.data_ptr<T>();
  const T zero(0.0f);
  const int64_t C = g.C, K = g.patch(), KWC = g.KW * C;
  const int64_t row_stride = g.W * C, image_stride = g.H * g.W * C;
  at::parallel_for(0, g.N * g.OH, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, g.OW * K)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t n = r / g.OH, oh = r % g.OH;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t iw0 = ow * g.stride[1] - g.pad[1];
        const Span span = inside(iw0, g);
        T* out = dst + (r * g.OW + ow) * K;
        for (int64_t kh = 0; kh < g.KH; ++kh, out += KWC) {
          const int64_t ih = oh * g.stride[0] - g.pad[0] + kh * g.dil[0];
          if (ih < 0 || ih >= g.H || span.lo == span.hi) {
            std::fill_n(out, KWC, zero);
            continue;
          }
          const T* row = src + n * image_stride + ih * row_stride;
          std::fill_n(out, span.lo * C, zero);
          if (g.dil[1] == 1) {
            std::copy_n(row + (iw0 + span.lo) * C, (span.hi - span.lo) * C, out + span.lo * C);
          } else {
            for (int64_t kw = span.lo; kw < span.hi; ++kw)
              std::copy_n(row + (iw0 + kw * g.dil[1]) * C, C, out + kw * C);
          }
          std::fill_n(out + span.hi * C, (g.KW - span.hi) * C, zero);
        }
      }
    }
  });
  return cols;
}

at::Tensor patches(const at::Tensor& image, const Geometry& g) {
  return image.scalar_type() == at::kBFloat16 ? patches_of<c10::BFloat16>(image, g) : patches_of<float>(image, g);
}

// The inverse: each row's values added to the image pixels its window covers, as a
// [N, C, H, W] tensor with channels-last strides. Images are independent (one thread each);
// within one, rows add in order, so the result does not depend on the thread count. Without
// dilation a window row's part inside the image is one run of up to KW*C values, as in patches().
at::Tensor scatter(const at::Tensor& cols, const Geometry& g) {
  at::Tensor image = at::zeros({g.N, g.H, g.W, g.C}, cols.options());
  const float* src = cols.data_ptr<float>();
  float* dst = image.data_ptr<float>();
  const int64_t C = g.C, K = g.patch(), KWC = g.KW * C;
  at::parallel_for(0, g.N, 1, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      float* plane = dst + n * g.H * g.W * C;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t iw0 = ow * g.stride[1] - g.pad[1];
          const Span span = inside(iw0, g);
          const float* in = src + ((n * g.OH + oh) * g.OW + ow) * K;
          for (int64_t kh = 0; kh < g.KH; ++kh, in += KWC) {
            const int64_t ih = oh * g.stride[0] - g.pad[0] + kh * g.dil[0];
            if (ih < 0 || ih >= g.H) continue;
            float* row = plane + ih * g.W * C;
            if (g.dil[1] == 1) {
              float* out = row + (iw0 + span.lo) * C;
              const float* add = in + span.lo * C;
              const int64_t count = (span.hi - span.lo) * C;
#pragma omp simd
              for (int64_t i = 0; i < count; ++i) out[i] += add[i];
            } else {
              for (int64_t kw = span.lo; kw < span.hi; ++kw) {
                float* out = row + (iw0 + kw * g.dil[1]) * C;
#pragma omp simd
                for (int64_t c = 0; c < C; ++c) out[c] += in[kw * C + c];
              }
            }
          }
        }
    }
  });
  return image.permute({0, 3, 1, 2});
}

// A [N, C, H, W] tensor as rows [N*H*W, C] (a view where it is channels-last already).
at::Tensor pixel_rows(const at::Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().view({-1, t.size(1)}); }

// Rows [N*H*W, C] back as a [N, C, H, W] tensor in `format` (channels-last: a view).
at::Tensor from_pixel_rows(const at::Tensor& rows, int64_t N, int64_t H, int64_t W, at::MemoryFormat format) {
  at::Tensor t = rows.view({N, H, W, rows.size(1)}).permute({0, 3, 1, 2});
  return format == at::MemoryFormat::ChannelsLast ? t : t.contiguous();
}

// The weight [A, B, KH, KW] as the matrix [A, KH*KW*B] whose columns follow the patches' (kh, kw,
// c) order: for a plain convolution [O, C, ...] the forward-sense weight, for a transposed one
// [Cin, Ot, ...] its own (a view where the weight is channels-last already).
at::Tensor weight_matrix(const at::Tensor& weight) {
  return weight.permute({0, 2, 3, 1}).contiguous().view({weight.size(0), -1});
}

// That matrix's gradient [A, KH*KW*B] back as the weight's shape, in `format`.
at::Tensor weight_from_matrix(const at::Tensor& m, const at::Tensor& weight, at::MemoryFormat format) {
  return m.view({weight.size(0), weight.size(2), weight.size(3), weight.size(1)}).permute({0, 3, 1, 2}).contiguous(format);
}

// The result's layout from the channels-last one scatter() gives.
at::Tensor in_format(const at::Tensor& t, at::MemoryFormat format) {
  return format == at::MemoryFormat::ChannelsLast ? t : t.contiguous();
}

// The GEMMs below run in their operands' dtype whatever the thread's autocast says (fp32, or
// bf16 for weight_grad()): a backward pass reaches them with autocast still on where the forward
// ran outside it (an fp32 step whose backward is called after its autocast() scope closed) -
// without this, autocast would hand back a bf16 product of fp32 operands.
struct NoAutocast {
  c10::impl::ExcludeDispatchKeyGuard guard{c10::DispatchKeySet(c10::DispatchKey::AutocastCPU)};
};

// The NCHW form (conv_planes.hpp) for an NCHW convolution with at least conv_planes::kMinPixels
// pixels on the small side.
bool nchw_form(const at::Tensor& input, const at::Tensor& weight, const Geometry& g, at::MemoryFormat format) {
  return format == at::MemoryFormat::Contiguous && g.OH * g.OW >= conv_planes::kMinPixels && input.is_contiguous() &&
         weight.is_contiguous() && conv_planes::available();
}

}  // namespace

namespace {

std::optional<Geometry> fit_dtype(const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a,
                                  at::ScalarType dtype) {
  if (a.groups != 1 || !plain(input, dtype) || !plain(weight, dtype) || input.numel() == 0 || weight.numel() == 0)
    return std::nullopt;
  Geometry g;
  if (!geometry(input, weight, a, g) || g.rows() * g.patch() > kMaxPatchElements) return std::nullopt;
  return g;
}

// The weight gradient of a plain convolution from grad_output's pixel rows [N*OH*OW, O], and of
// a transposed one from grad_output's patches [N*H*W, KH*KW*Ot]: one GEMM each.
at::Tensor plain_weight_grad(const at::Tensor& grad_rows, const at::Tensor& input, const at::Tensor& weight,
                             const Geometry& g, at::MemoryFormat format) {
  return weight_from_matrix(at::mm(grad_rows.t(), patches(input, g)), weight, format);
}

at::Tensor transposed_weight_grad(const at::Tensor& grad_cols, const at::Tensor& input, const at::Tensor& weight,
                                  at::MemoryFormat format) {
  return weight_from_matrix(at::mm(pixel_rows(input).t(), grad_cols), weight, format);
}

}  // namespace

std::optional<Geometry> fit_any(const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a) {
  return fit_dtype(input, weight, a, at::kFloat);
}

std::optional<Geometry> fit_bf16_weight_grad(const at::Tensor& grad_output, const at::Tensor& input,
                                             const at::Tensor& weight, const ConvArgs& a) {
  if (!compat::kBf16MatmulSumsInFp32) return std::nullopt;
  auto g = fit_dtype(input, weight, a, at::kBFloat16);
  if (!g || !plain(grad_output, at::kBFloat16) || grad_output.sizes() != at::IntArrayRef(g->output_shape()))
    return std::nullopt;
  return g;
}

at::Tensor weight_grad(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                       const Geometry& g) {
  const NoAutocast as_given;
  const at::MemoryFormat format = result_format(input, weight, g.transposed);
  if (!g.transposed) return plain_weight_grad(pixel_rows(grad_output), input, weight, g, format);
  return transposed_weight_grad(patches(grad_output, g), input, weight, format);
}

at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                   const Geometry& g) {
  const NoAutocast fp32;
  const at::MemoryFormat format = result_format(input, weight, g.transposed);
  if (nchw_form(input, weight, g, format)) return conv_planes::forward(input, weight, bias, g);
  const bool with_bias = bias.has_value() && bias->defined();
  if (!g.transposed) {
    const at::Tensor w = weight_matrix(weight).t();
    const at::Tensor cols = patches(input, g);
    const at::Tensor rows = with_bias ? at::addmm(*bias, cols, w) : at::mm(cols, w);
    return from_pixel_rows(rows, g.N, g.OH, g.OW, format);
  }
  // Transposed: the input's pixels, each times the weight, scattered over the output.
  at::Tensor out = scatter(at::mm(pixel_rows(input), weight_matrix(weight)), g);
  if (with_bias) out.add_(bias->view({1, -1, 1, 1}));
  return in_format(out, format);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                        const at::Tensor& weight, const Geometry& g,
                                                        std::array<bool, 3> output_mask) {
  const NoAutocast fp32;
  const at::MemoryFormat format = result_format(input, weight, g.transposed);
  if (nchw_form(input, weight, g, format)) return conv_planes::backward(grad_output, input, weight, g, output_mask);
  at::Tensor grad_input, grad_weight, grad_bias;
  // Sums of up to N*H*W values, in fp64 (as LibTorch's kernel is accurate to fp32's rounding).
  if (output_mask[2]) grad_bias = at::sum(grad_output, {0, 2, 3}, false, at::kDouble).to(at::kFloat);
  if (!g.transposed) {
    const at::Tensor rows = pixel_rows(grad_output);  // [N*OH*OW, O]
    if (output_mask[1]) grad_weight = plain_weight_grad(rows, input, weight, g, format);
    if (output_mask[0]) grad_input = in_format(scatter(at::mm(rows, weight_matrix(weight)), g), format);
    return {grad_input, grad_weight, grad_bias};
  }
  // Transposed: grad_output is the forward-sense image; its patches meet the input's pixels.
  const at::Tensor cols = patches(grad_output, g);  // [N*H*W, KH*KW*Ot]
  if (output_mask[1]) grad_weight = transposed_weight_grad(cols, input, weight, format);
  if (output_mask[0]) grad_input = from_pixel_rows(at::mm(cols, weight_matrix(weight).t()), g.N, g.OH, g.OW, format);
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace accelkit::cpu::conv_gemm
