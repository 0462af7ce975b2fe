// The CPU candidates of kernels/batch_norm.h's pooled kernels, batch norm, ReLU and 2 x 2 max
// pooling every 2 in one: for bf16 and f16 on AVX-512 BF16 each plane normalized, cut, rounded
// and pooled in registers; for every dtype the same per plane in the compute type; the
// backward's gradient sent to the windows' winners, then batch norm's backward; and the
// fallbacks, the unfused kernels in turn.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/batch_norm.h"
#include "kernels/cpu/batch_norm_chunks.h"
#include "kernels/cpu/batch_norm_rows.h"
#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "kernels/max_pool2d.h"
#include "kernels/row_sums.h"
#include "tensor/element.h"

namespace mixp::kernels {
namespace {

using namespace batch_norm_chunks;

/// max_pool2d's windows for the pooled kernels: 2 x 2 every 2 over x's planes.
Pool2dShape pairs_of(const Tensor& x) {
  return {.planes = x.size(0) * x.size(1),
          .h = x.size(2),
          .w = x.size(3),
          .rows = sliding_axis(x.size(2), 2, 2, 0),
          .cols = sliding_axis(x.size(3), 2, 2, 0)};
}

/// The window places (0..3) of max_pool2d's indices, positions within a plane of width w.
void places_from_index(const Tensor& index, int64_t w, Tensor& window) {
  const int64_t oh = window.size(2), ow = window.size(3);
  const int64_t* in = index.data<int64_t>();
  uint8_t* out = window.data<uint8_t>();
  for (int64_t o = 0; o < index.numel(); ++o) {
    const int64_t i = (o / ow) % oh, j = o % ow;
    out[o] = uint8_t(2 * (in[o] / w - 2 * i) + (in[o] % w - 2 * j));
  }
}

/// The inverse: each window place as max_pool2d's index within its plane.
Tensor index_from_places(const Tensor& window, int64_t w) {
  const int64_t oh = window.size(2), ow = window.size(3);
  Tensor index = empty(window.shape(), DType::i64, MemoryTag::workspace, window.device());
  const uint8_t* in = window.data<uint8_t>();
  int64_t* out = index.data<int64_t>();
  for (int64_t o = 0; o < window.numel(); ++o) {
    const int64_t i = (o / ow) % oh, j = o % ow;
    out[o] = (2 * i + in[o] / 2) * w + 2 * j + in[o] % 2;
  }
  return index;
}

// The window places to write, or null for an undefined window (a forward nothing will take the
// gradient of).
uint8_t* window_places(Tensor& window) {
  return window.defined() ? window.data<uint8_t>() : nullptr;
}

template <typename T>
void relu_pool_half_rows(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         Tensor& running_mean, Tensor& running_var, BatchNormParams params,
                         Tensor& y, Tensor& window, Tensor& mean_out, Tensor& rstd_out) {
  const Geometry geo = geometry_of(x.shape());
  const int64_t h = x.size(2), w = x.size(3), pooled = (h / 2) * (w / 2);
  const Stats<float> st = fast_forward_stats<T, true>(x, geo, params, running_mean, running_var);
  const std::vector<float> scale = values_as<float>(weight), shift = values_as<float>(bias);
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  uint8_t* wd = window_places(window);
  parallel_for(geo.units(), geo.grain(), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const size_t c = size_t(u % geo.c);
      avx512_bf16::batch_norm_relu_pool_plane(
          half_of<T>(), &xd[u * h * w].bits, h, w, &yd[u * pooled].bits,
          wd ? wd + u * pooled : nullptr,
          st.mean[c], st.rstd[c], scale.empty() ? 1.0f : scale[c], shift.empty() ? 0.0f : shift[c]);
    }
  });
  save_stats<float, float>(st, mean_out, rstd_out);
}

void relu_pool_forward_half(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            Tensor& running_mean, Tensor& running_var, BatchNormParams params,
                            Tensor& y, Tensor& window, Tensor& mean_out, Tensor& rstd_out) {
  if (x.dtype() == DType::bf16) {
    relu_pool_half_rows<bfloat16>(x, weight, bias, running_mean, running_var, params, y, window,
                                  mean_out, rstd_out);
  } else {
    relu_pool_half_rows<float16>(x, weight, bias, running_mean, running_var, params, y, window,
                                 mean_out, rstd_out);
  }
}

/// One plane normalized, cut at zero and rounded as normalize_chunked<T, true, false> computes
/// each value, then pooled as max_pool2d over the rounded values: a later value of a window
/// wins only when greater (none is NaN or negative after the cut). rows: 2 w values of scratch
/// (4 w for 16-bit T: the rounded copy as well).
template <typename T>
void relu_pool_plane(const T* x, int64_t h, int64_t w, Compute<T> m, Compute<T> rs,
                     Compute<T> scale, Compute<T> shift, Compute<T>* rows, T* y, uint8_t* window) {
  using C = Compute<T>;
  const int64_t oh = h / 2, ow = w / 2;
  for (int64_t i = 0; i < oh; ++i) {
    const C* in = rows;
    if constexpr (std::is_same_v<T, C>) {
      in = x + 2 * i * w;
    } else {
      widen(x + 2 * i * w, 2 * w, rows);
    }
    for (int64_t k = 0; k < 2 * w; ++k) {
      const C v = (in[k] - m) * rs * scale + shift;
      rows[k] = v > C(0) ? v : C(0);
    }
    // 16-bit T: the values rounded, then read back exactly for the comparisons.
    T* rounded = reinterpret_cast<T*>(rows + 2 * w);
    if constexpr (!std::is_same_v<T, C>) {
      narrow(rows, 2 * w, rounded);
      widen(rounded, 2 * w, rows);
    }
    for (int64_t j = 0; j < ow; ++j) {
      const C* top = rows + 2 * j;
      const C candidates[4] = {top[0], top[1], top[w], top[w + 1]};
      // Selects rather than branches: which value wins is data, not a pattern to predict.
      uint8_t place = 0;
      C best = candidates[0];
      for (uint8_t k = 1; k < 4; ++k) {
        const bool take = candidates[k] > best;
        best = take ? candidates[k] : best;
        place = take ? k : place;
      }
      if (window) window[i * ow + j] = place;
      if constexpr (std::is_same_v<T, C>) {
        y[i * ow + j] = candidates[place];
      } else {
        y[i * ow + j] = rounded[(place / 2) * w + 2 * j + place % 2];
      }
    }
  }
}

template <typename T>
void relu_pool_chunked(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor& running_mean, Tensor& running_var, BatchNormParams params, Tensor& y,
                       Tensor& window, Tensor& mean_out, Tensor& rstd_out) {
  using C = Compute<T>;
  const Geometry geo = geometry_of(x.shape());
  const int64_t h = x.size(2), w = x.size(3), pooled = (h / 2) * (w / 2);
  const Stats<C> st = fast_forward_stats<T, false>(x, geo, params, running_mean, running_var);
  const std::vector<C> scale = values_as<C>(weight), shift = values_as<C>(bias);
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  uint8_t* wd = window_places(window);
  parallel_for(geo.units(), geo.grain(), [&](int64_t begin, int64_t end) {
    const auto rows = chunk_scratch<C>(4 * w);
    for (int64_t u = begin; u < end; ++u) {
      const size_t c = size_t(u % geo.c);
      relu_pool_plane<T>(xd + u * h * w, h, w, st.mean[c], st.rstd[c],
                         scale.empty() ? C(1) : scale[c], shift.empty() ? C(0) : shift[c],
                         rows.get(), yd + u * pooled, wd ? wd + u * pooled : nullptr);
    }
  });
  save_stats<C, C>(st, mean_out, rstd_out);
}

void relu_pool_forward_chunked(const Tensor& x, const Tensor& weight, const Tensor& bias,
                               Tensor& running_mean, Tensor& running_var, BatchNormParams params,
                               Tensor& y, Tensor& window, Tensor& mean_out, Tensor& rstd_out) {
  visit_floating(x.dtype(), "batch_norm_relu_pool", [&]<typename T>() {
    relu_pool_chunked<T>(x, weight, bias, running_mean, running_var, params, y, window, mean_out,
                         rstd_out);
  });
}

bool is_half_pool(const Tensor& x, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                  const BatchNormParams&, const Tensor&, const Tensor&, const Tensor&,
                  const Tensor&) {
  return x.dtype() == DType::bf16 || x.dtype() == DType::f16;
}

// batch_norm_relu_forward into a full-size buffer, then max_pool2d_forward over it.
void unfused_relu_pool_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                               Tensor& running_mean, Tensor& running_var, BatchNormParams params,
                               Tensor& y, Tensor& window, Tensor& mean_out, Tensor& rstd_out) {
  Tensor full = empty(x.shape(), x.dtype(), MemoryTag::workspace, x.device());
  batch_norm_relu_forward(x, weight, bias, running_mean, running_var, params, full, mean_out,
                          rstd_out);
  Tensor index = empty(y.shape(), DType::i64, MemoryTag::workspace, x.device());
  max_pool2d_forward(pairs_of(x), full, y, index);
  if (window.defined()) places_from_index(index, x.size(3), window);
}

/// One plane of scatter_winners: out [h, w] from y, window and g [oh, ow]. Plain pointers and
/// selects: a branch on the cut would be mispredicted for half the windows.
template <typename T>
void scatter_plane(const T* __restrict y, const uint8_t* __restrict window, const T* __restrict g,
                   int64_t oh, int64_t ow, int64_t w, T* __restrict out) {
  const T zero = from_double<T>(0.0);
  for (int64_t i = 0; i < oh; ++i) {
    for (int64_t j = 0; j < ow; ++j) {
      const int64_t o = i * ow + j;
      bool passes = false;
      if constexpr (sizeof(T) == 2) {
        passes = y[o].bits != 0 && (g[o].bits & 0x7fff) != 0;
      } else {
        passes = y[o] > T(0) && g[o] != T(0);
      }
      const int k = window[o];
      out[(2 * i + k / 2) * w + 2 * j + k % 2] = passes ? g[o] : zero;
    }
  }
}

/// ReLU's backward at each window's winner (g where y > 0; y is a ReLU's output, never -0 or
/// NaN, so for the 16-bit formats where its bits are not zero), sent to the winner's place, +0
/// (all bits zero) elsewhere; a zero g arrives as +0, as max_pool2d_backward's fp32 sum from +0
/// makes it.
template <typename T>
void scatter_winners(const T* y, const uint8_t* window, const T* g, int64_t planes, int64_t h,
                     int64_t w, T* full) {
  const int64_t oh = h / 2, ow = w / 2;
  parallel_for(planes, std::max<int64_t>(1, 16 * kBlock / std::max<int64_t>(h * w, 1)),
               [&](int64_t begin, int64_t end) {
                 std::memset(static_cast<void*>(full + begin * h * w), 0,
                             size_t((end - begin) * h * w) * sizeof(T));
                 for (int64_t plane = begin; plane < end; ++plane) {
                   const int64_t first = plane * oh * ow;
                   scatter_plane<T>(y + first, window + first, g + first, oh, ow, w,
                                    full + plane * h * w);
                 }
               });
}

void relu_pool_backward_scatter(const Tensor& x, const Tensor& y, const Tensor& window,
                                const Tensor& g, const Tensor& weight, const Tensor& mean,
                                const Tensor& rstd, bool training, Tensor& dx, Tensor& dweight,
                                Tensor& dbias) {
  Tensor full = empty(x.shape(), x.dtype(), MemoryTag::workspace, x.device());
  visit_floating(x.dtype(), "batch_norm_relu_pool", [&]<typename T>() {
    scatter_winners<T>(y.data<T>(), window.data<uint8_t>(), g.data<T>(), x.size(0) * x.size(1),
                       x.size(2), x.size(3), full.data<T>());
  });
  batch_norm_backward(x, full, weight, mean, rstd, training, dx, dweight, dbias);
}

/// The pooled backward for bf16 and f16 with the scatter folded into batch norm's two passes:
/// each plane's full-size gradient is built by scatter_winners' AVX-512 plane in a scratch of
/// one plane, which stays in L1, and summed or turned into dx from there by batch norm's rows,
/// so the full-size gradient is never written to memory and read back twice. The same planes,
/// sums in the same chunks and the same rows as the scatter then batch_norm_backward: the same
/// bits.
template <typename T>
void relu_pool_backward_folded(const Tensor& x, const Tensor& y, const Tensor& window,
                               const Tensor& g, const Tensor& weight, const Tensor& mean,
                               const Tensor& rstd, bool training, Tensor& dx, Tensor& dweight,
                               Tensor& dbias) {
  const Geometry geo = geometry_of(x.shape());
  const int64_t h = x.size(2), w = x.size(3), s = geo.s, pooled = (h / 2) * (w / 2);
  const T* xd = x.data<T>();
  const T* yd = y.data<T>();
  const T* gd = g.data<T>();
  const uint8_t* wd = window.data<uint8_t>();
  const float* md = mean.data<float>();
  const float* rd = rstd.data<float>();
  auto plane_gradient = [&](int64_t u, uint16_t* out) {
    avx512_bf16::batch_norm_relu_pool_scatter_plane(&yd[u * pooled].bits, wd + u * pooled,
                                                    &gd[u * pooled].bits, h, w, out);
  };
  std::vector<float> sums(static_cast<size_t>(2 * geo.c), 0.0f);  // [c][sum(g), sum(g xhat)]
  if ((dx.defined() && training) || dweight.defined() || dbias.defined()) {
    sums = channel_sums<float>(geo, 2, [&](int64_t begin, int64_t end, float* p) {
      const auto plane = chunk_scratch<uint16_t>(s);
      for (int64_t u = begin; u < end; ++u) {
        const int64_t c = u % geo.c;
        plane_gradient(u, plane.get());
        float sum_g = 0, sum_gx = 0;
        avx512_bf16::batch_norm_grad_sums(half_of<T>(), &xd[u * s].bits, plane.get(), nullptr, s,
                                          md[c], rd[c], sum_g, sum_gx);
        p[2 * c] += sum_g;
        p[2 * c + 1] += sum_gx;
      }
    });
  }
  if (dx.defined()) {
    const std::vector<float> scale = values_as<float>(weight);
    const float count = float(geo.per_channel());
    T* out = dx.data<T>();
    parallel_for(geo.units(), geo.grain(), [&](int64_t begin, int64_t end) {
      const auto plane = chunk_scratch<uint16_t>(s);
      for (int64_t u = begin; u < end; ++u) {
        const size_t c = size_t(u % geo.c);
        plane_gradient(u, plane.get());
        avx512_bf16::batch_norm_grad_rows(half_of<T>(), &xd[u * s].bits, plane.get(), nullptr,
                                          &out[u * s].bits, s, md[c], rd[c],
                                          scale.empty() ? 1.0f : scale[c], sums[2 * c] / count,
                                          sums[2 * c + 1] / count, training);
      }
    });
  }
  if (dweight.defined()) store_channels(sums, 2, 1, dweight);
  if (dbias.defined()) store_channels(sums, 2, 0, dbias);
}

void relu_pool_backward_half(const Tensor& x, const Tensor& y, const Tensor& window,
                             const Tensor& g, const Tensor& weight, const Tensor& mean,
                             const Tensor& rstd, bool training, Tensor& dx, Tensor& dweight,
                             Tensor& dbias) {
  if (x.dtype() == DType::bf16) {
    relu_pool_backward_folded<bfloat16>(x, y, window, g, weight, mean, rstd, training, dx,
                                        dweight, dbias);
  } else {
    relu_pool_backward_folded<float16>(x, y, window, g, weight, mean, rstd, training, dx, dweight,
                                       dbias);
  }
}

bool is_half_pool_backward(const Tensor& x, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&, const Tensor&, const bool&, const Tensor&,
                           const Tensor&, const Tensor&) {
  return x.dtype() == DType::bf16 || x.dtype() == DType::f16;
}

// ReLU's backward on the pooled values (g where y > 0, else 0: y > 0 exactly where the
// full-size output is at the window's winner), max_pool2d_backward, then batch_norm_backward.
void unfused_relu_pool_backward(const Tensor& x, const Tensor& y, const Tensor& window,
                                const Tensor& g, const Tensor& weight, const Tensor& mean,
                                const Tensor& rstd, bool training, Tensor& dx, Tensor& dweight,
                                Tensor& dbias) {
  Tensor masked = empty(g.shape(), g.dtype(), MemoryTag::workspace, g.device());
  visit_floating(g.dtype(), "batch_norm_relu_pool", [&]<typename T>() {
    const T* yd = y.data<T>();
    const T* gd = g.data<T>();
    T* md = masked.data<T>();
    for (int64_t i = 0; i < g.numel(); ++i) {
      md[i] = to_double(yd[i]) > 0.0 ? gd[i] : from_double<T>(0.0);
    }
  });
  Tensor full = empty(x.shape(), x.dtype(), MemoryTag::workspace, x.device());
  max_pool2d_backward(pairs_of(x), masked, index_from_places(window, x.size(3)), full);
  batch_norm_backward(x, full, weight, mean, rstd, training, dx, dweight, dbias);
}

}  // namespace

Kernel<BatchNormReluPoolFn> batch_norm_relu_pool_forward(
    "batch_norm_relu_pool_forward",
    {{.name = "half_rows_pooled",
      .isa = Isa::avx512_bf16,
      .applies = is_half_pool,
      .fn = relu_pool_forward_half},
     {.name = "openmp_pooled", .fn = relu_pool_forward_chunked},
     {.name = "unfused", .fn = unfused_relu_pool_forward, .fallback = true}});

Kernel<BatchNormReluPoolBackwardFn> batch_norm_relu_pool_backward(
    "batch_norm_relu_pool_backward",
    {{.name = "half_rows_folded",
      .isa = Isa::avx512_bf16,
      .applies = is_half_pool_backward,
      .fn = relu_pool_backward_half},
     {.name = "openmp_scatter", .fn = relu_pool_backward_scatter},
     {.name = "unfused", .fn = unfused_relu_pool_backward, .fallback = true}});

}  // namespace mixp::kernels
