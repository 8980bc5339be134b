// Training-mode batch normalisation over fp32 for the CPU plugin (batch_norm_op.hpp).
#include "batch_norm_op.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "batch_norm_kernel.hpp"

namespace accelkit::cpu::batch_norm {

namespace {

// How a tensor's elements lie: `rows` rows of C channels each (channels-last, or [N, C]), or N
// planes a channel of `plane` elements each (NCHW-style).
struct Layout {
  bool rows = false;
  int64_t N = 0, C = 0, plane = 0;
  int64_t per_channel() const { return N * plane; }
};

bool is_fp32_vector(const c10::optional<at::Tensor>& t, int64_t C) {
  if (!t.has_value() || !t->defined()) return true;
  return t->scalar_type() == at::kFloat && t->device().is_cpu() && t->dim() == 1 && t->size(0) == C &&
         t->is_contiguous() && !t->is_quantized();
}

bool present(const c10::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

std::optional<Layout> layout_of(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.device().is_cpu() || x.is_quantized() || x.dim() < 2 || x.dim() > 5 ||
      x.layout() != at::kStrided)
    return std::nullopt;
  const int64_t N = x.size(0), C = x.size(1);
  if (N == 0 || C == 0) return std::nullopt;
  const int64_t plane = x.numel() / (N * C);
  if (plane == 0) return std::nullopt;
  Layout l;
  l.N = N;
  l.C = C;
  l.plane = plane;
  if (x.is_contiguous()) {
    l.rows = plane == 1;  // [N, C] (or N x C x 1 x 1): rows of C; else N planes a channel
    return l;
  }
  const bool cl = (x.dim() == 4 && x.is_contiguous(at::MemoryFormat::ChannelsLast)) ||
                  (x.dim() == 5 && x.is_contiguous(at::MemoryFormat::ChannelsLast3d));
  if (!cl) return std::nullopt;
  l.rows = true;
  return l;
}

// Fixed chunks of the rows (or planes), so the sums' order does not depend on the threads.
int64_t chunk_count(int64_t units, int64_t unit_elements) {
  const int64_t min_elements = 16384;
  const int64_t per_chunk_units = std::max<int64_t>(1, min_elements / std::max<int64_t>(1, unit_elements));
  return std::min<int64_t>(64, (units + per_chunk_units - 1) / per_chunk_units);
}

// Per-channel sums over rows of C, chunk by chunk, added in chunk order: fn(first row, rows, a, b)
// adds a chunk's part into a[C] and b[C].
template <class Fn>
void row_sums(const Layout& l, std::vector<double>& a, std::vector<double>& b, Fn fn) {
  const int64_t C = l.C, rows = l.N * l.plane;
  const int64_t chunks = chunk_count(rows, C);
  std::vector<double> pa(chunks * C, 0.0), pb(chunks * C, 0.0);
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t r0 = rows * k / chunks, r1 = rows * (k + 1) / chunks;
      fn(r0, r1 - r0, pa.data() + k * C, pb.data() + k * C);
    }
  });
  a.assign(C, 0.0);
  b.assign(C, 0.0);
  for (int64_t k = 0; k < chunks; ++k)
    for (int64_t c = 0; c < C; ++c) {
      a[c] += pa[k * C + c];
      b[c] += pb[k * C + c];
    }
}

// The same over planes: fn(first plane, end, a, b) writes each plane's sums to a[p] and b[p],
// added per channel in plane order.
template <class Fn>
void plane_sums(const Layout& l, std::vector<double>& a, std::vector<double>& b, Fn fn) {
  const int64_t C = l.C, planes = l.N * C;
  std::vector<double> pa(planes, 0.0), pb(planes, 0.0);
  const int64_t grain = std::max<int64_t>(1, 16384 / l.plane);
  at::parallel_for(0, planes, grain, [&](int64_t begin, int64_t end) { fn(begin, end, pa.data(), pb.data()); });
  a.assign(C, 0.0);
  b.assign(C, 0.0);
  for (int64_t n = 0; n < l.N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      a[c] += pa[n * C + c];
      b[c] += pb[n * C + c];
    }
}

// An elementwise pass over rows (fn(first row, rows)) or planes (fn(first plane, end)).
template <class Fn>
void row_pass(const Layout& l, Fn fn) {
  at::parallel_for(0, l.N * l.plane, std::max<int64_t>(1, 16384 / l.C), [&](int64_t b, int64_t e) { fn(b, e - b); });
}
template <class Fn>
void plane_pass(const Layout& l, Fn fn) {
  at::parallel_for(0, l.N * l.C, std::max<int64_t>(1, 16384 / l.plane), [&](int64_t b, int64_t e) { fn(b, e); });
}

const float* maybe_data(const c10::optional<at::Tensor>& t) { return present(t) ? t->data_ptr<float>() : nullptr; }

}  // namespace

std::optional<Result3> forward(const at::Tensor& input, const c10::optional<at::Tensor>& weight,
                               const c10::optional<at::Tensor>& bias, const c10::optional<at::Tensor>& running_mean,
                               const c10::optional<at::Tensor>& running_var, double momentum, double eps) {
#if defined(__x86_64__) || defined(_M_X64)
  const auto l = layout_of(input);
  if (!l || l->per_channel() < 2) return std::nullopt;
  const int64_t C = l->C;
  if (!is_fp32_vector(weight, C) || !is_fp32_vector(bias, C) || !is_fp32_vector(running_mean, C) ||
      !is_fp32_vector(running_var, C) || present(running_mean) != present(running_var))
    return std::nullopt;
  const float* x = input.data_ptr<float>();
  // Each channel's first element, the shift its sums are taken from.
  std::vector<float> shift(C);
  for (int64_t c = 0; c < C; ++c) shift[c] = l->rows ? x[c] : x[c * l->plane];
  std::vector<double> sum, sq;
  if (l->rows)
    row_sums(*l, sum, sq, [&](int64_t r0, int64_t n, double* a, double* b) {
      detail::bn_stats_rows_avx2(x + r0 * C, n, C, shift.data(), a, b);
    });
  else
    plane_sums(*l, sum, sq, [&](int64_t p0, int64_t p1, double* a, double* b) {
      detail::bn_stats_planes_avx2(x, p0, p1, l->plane, C, shift.data(), a, b);
    });
  const double M = static_cast<double>(l->per_channel());
  at::Tensor save_mean = at::empty({C}, input.options());
  at::Tensor save_invstd = at::empty({C}, input.options());
  float* mean = save_mean.data_ptr<float>();
  float* invstd = save_invstd.data_ptr<float>();
  std::vector<float> scale(C), offset(C);
  const float* w = maybe_data(weight);
  const float* b = maybe_data(bias);
  float* rm = present(running_mean) ? running_mean->data_ptr<float>() : nullptr;
  float* rv = present(running_var) ? running_var->data_ptr<float>() : nullptr;
  for (int64_t c = 0; c < C; ++c) {
    const double d = sum[c] / M;
    const double v = sq[c] / M - d * d;
    const double var = v < 0.0 ? 0.0 : v;  // rounding below 0 only (a NaN stays one)
    const double m = static_cast<double>(shift[c]) + d;
    const double is = 1.0 / std::sqrt(var + eps);
    mean[c] = static_cast<float>(m);
    invstd[c] = static_cast<float>(is);
    const double s = (w ? static_cast<double>(w[c]) : 1.0) * is;
    scale[c] = static_cast<float>(s);
    // (x - shift) is exact for x within a factor of two of it: the output rounds once more than
    // the sum, not with the mean's own rounding.
    offset[c] = static_cast<float>((b ? static_cast<double>(b[c]) : 0.0) + (static_cast<double>(shift[c]) - m) * s);
    if (rm != nullptr) {
      rm[c] = static_cast<float>(momentum * m + (1.0 - momentum) * static_cast<double>(rm[c]));
      rv[c] = static_cast<float>(momentum * var * M / (M - 1.0) + (1.0 - momentum) * static_cast<double>(rv[c]));
    }
  }
  at::Tensor out = at::empty_like(input);
  float* y = out.data_ptr<float>();
  if (l->rows)
    row_pass(*l, [&](int64_t r0, int64_t n) {
      detail::bn_apply_rows_avx2(x + r0 * C, y + r0 * C, n, C, shift.data(), scale.data(), offset.data());
    });
  else
    plane_pass(*l, [&](int64_t p0, int64_t p1) {
      detail::bn_apply_planes_avx2(x, y, p0, p1, l->plane, C, shift.data(), scale.data(), offset.data());
    });
  return Result3{out, save_mean, save_invstd};
#else
  (void)input, (void)weight, (void)bias, (void)running_mean, (void)running_var, (void)momentum, (void)eps;
  return std::nullopt;
#endif
}

std::optional<Result3> backward(const at::Tensor& grad_out, const at::Tensor& input,
                                const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& save_mean,
                                const c10::optional<at::Tensor>& save_invstd, std::array<bool, 3> output_mask) {
#if defined(__x86_64__) || defined(_M_X64)
  const auto l = layout_of(input);
  // NCHW planes: LibTorch's backward is as fast (it reads them at memory speed already).
  if (!l || !l->rows || l->per_channel() < 2) return std::nullopt;
  const int64_t C = l->C;
  if (!present(save_mean) || !present(save_invstd) || !is_fp32_vector(weight, C) || !is_fp32_vector(save_mean, C) ||
      !is_fp32_vector(save_invstd, C))
    return std::nullopt;
  if (grad_out.scalar_type() != at::kFloat || !grad_out.device().is_cpu() || grad_out.layout() != at::kStrided ||
      grad_out.sizes() != input.sizes() || grad_out.strides() != input.strides())
    return std::nullopt;
  const float* x = input.data_ptr<float>();
  const float* g = grad_out.data_ptr<float>();
  const float* mean = save_mean->data_ptr<float>();
  const float* invstd = save_invstd->data_ptr<float>();
  const float* w = maybe_data(weight);
  std::vector<double> sum_dy, dot;
  row_sums(*l, sum_dy, dot, [&](int64_t r0, int64_t n, double* a, double* b) {
    detail::bn_grad_stats_rows_avx2(g + r0 * C, x + r0 * C, n, C, mean, a, b);
  });
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const double M = static_cast<double>(l->per_channel());
    std::vector<float> a(C), k(C), d(C);
    for (int64_t c = 0; c < C; ++c) {
      const double is = static_cast<double>(invstd[c]);
      const double ws = (w ? static_cast<double>(w[c]) : 1.0) * is;
      a[c] = static_cast<float>(ws);
      k[c] = static_cast<float>(-ws * is * is * dot[c] / M);
      d[c] = static_cast<float>(-ws * sum_dy[c] / M);
    }
    grad_input = at::empty_like(input);
    float* dx = grad_input.data_ptr<float>();
    row_pass(*l, [&](int64_t r0, int64_t n) {
      detail::bn_grad_input_rows_avx2(g + r0 * C, x + r0 * C, dx + r0 * C, n, C, a.data(), k.data(), mean, d.data());
    });
  }
  if (output_mask[1]) {
    grad_weight = at::empty({C}, input.options());
    float* gw = grad_weight.data_ptr<float>();
    for (int64_t c = 0; c < C; ++c) gw[c] = static_cast<float>(dot[c] * static_cast<double>(invstd[c]));
  }
  if (output_mask[2]) {
    grad_bias = at::empty({C}, input.options());
    float* gb = grad_bias.data_ptr<float>();
    for (int64_t c = 0; c < C; ++c) gb[c] = static_cast<float>(sum_dy[c]);
  }
  return Result3{grad_input, grad_weight, grad_bias};
#else
  (void)grad_out, (void)input, (void)weight, (void)save_mean, (void)save_invstd, (void)output_mask;
  return std::nullopt;
#endif
}

}  // namespace accelkit::cpu::batch_norm
