// The CPU candidates of kernels/batch_norm.h's batch_norm and batch_norm_relu kernels: chunks of
// units split over the threads (kernels/cpu/batch_norm_chunks.h), computed in the dtype's
// compute type (for bf16 and f16 on AVX-512 BF16, every pass widens and rounds in registers),
// the ReLU-fused forms of the same, and the fallbacks: one thread accumulating in double, and
// for the fused kernels the unfused ones in turn. The pooled kernels are in
// kernels/cpu/batch_norm_relu_pool.cpp.
#include "kernels/batch_norm.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/batch_norm_chunks.h"
#include "kernels/cpu/batch_norm_rows.h"
#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "kernels/row_sums.h"
#include "tensor/element.h"

namespace mixp::kernels {
namespace {

using namespace batch_norm_chunks;

// ---- fast: fp32 compute (f64 for f64), chunks of units in parallel ----

/// Rows: bf16 and f16 runs summed from registers (kernels/cpu/batch_norm_rows.h), the same bits.
template <typename T, bool Rows>
Stats<Compute<T>> batch_stats_chunked(const T* x, Geometry geo, double eps) {
  using C = Compute<T>;
  constexpr bool kRows = Rows && kHalf<T>;
  const int64_t s = geo.s;
  const std::vector<C> sums = channel_sums<C>(geo, 1, [&](int64_t begin, int64_t end, C* p) {
    if constexpr (kRows) {
      for (int64_t u = begin; u < end; ++u)
        p[u % geo.c] += avx512_bf16::batch_norm_sum(half_of<T>(), &x[u * s].bits, s);
      return;
    }
    const auto v = chunk_scratch<C>((end - begin) * s);
    widen(x + begin * s, (end - begin) * s, v.get());
    for (int64_t u = begin; u < end; ++u) p[u % geo.c] += row_sum(v.get() + (u - begin) * s, s);
  });
  Stats<C> st;
  st.mean.resize(sums.size());
  for (size_t c = 0; c < sums.size(); ++c) st.mean[c] = sums[c] / C(geo.per_channel());
  const std::vector<C> squares = channel_sums<C>(geo, 1, [&](int64_t begin, int64_t end, C* p) {
    if constexpr (kRows) {
      for (int64_t u = begin; u < end; ++u) {
        p[u % geo.c] += avx512_bf16::batch_norm_centered_squares(half_of<T>(), &x[u * s].bits, s,
                                                                 st.mean[size_t(u % geo.c)]);
      }
      return;
    }
    const auto v = chunk_scratch<C>((end - begin) * s);
    widen(x + begin * s, (end - begin) * s, v.get());
    for (int64_t u = begin; u < end; ++u) {
      const C m = st.mean[size_t(u % geo.c)];
      C* run = v.get() + (u - begin) * s;  // a copy: becomes x - mean
      for (int64_t i = 0; i < s; ++i) run[i] -= m;
      p[u % geo.c] += row_dot(run, run, s);
    }
  });
  st.var.resize(sums.size());
  st.rstd.resize(sums.size());
  for (size_t c = 0; c < sums.size(); ++c) {
    st.var[c] = squares[c] / C(geo.per_channel());
    st.rstd[c] = C(1) / std::sqrt(st.var[c] + C(eps));
  }
  return st;
}

/// Relu: max(., 0) of each fp32 result before its one rounding, which gives the bits of
/// rounding first: rounding keeps the sign and maps 0 to 0. Rows: bf16 and f16 runs widened and
/// rounded in registers (kernels/cpu/batch_norm_rows.h), the same operations without the chunk's
/// copy.
template <typename T, bool Relu, bool Rows>
void normalize_chunked(const T* x, Geometry geo, const Stats<Compute<T>>& st,
                       const std::vector<Compute<T>>& w, const std::vector<Compute<T>>& b, T* y) {
  using C = Compute<T>;
  const int64_t s = geo.s;
  if constexpr (Rows && kHalf<T>) {
    parallel_for(geo.units(), geo.grain(), [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        const size_t c = size_t(u % geo.c);
        avx512_bf16::batch_norm_rows(half_of<T>(), &x[u * s].bits, &y[u * s].bits, s, st.mean[c],
                                     st.rstd[c], w.empty() ? 1.0f : w[c], b.empty() ? 0.0f : b[c],
                                     Relu);
      }
    });
    return;
  }
  parallel_for(geo.units(), geo.grain(), [&](int64_t begin, int64_t end) {
    const auto v = chunk_scratch<C>((end - begin) * s);
    widen(x + begin * s, (end - begin) * s, v.get());
    for (int64_t u = begin; u < end; ++u) {
      const size_t c = size_t(u % geo.c);
      const C m = st.mean[c], rs = st.rstd[c];
      const C scale = w.empty() ? C(1) : w[c], shift = b.empty() ? C(0) : b[c];
      C* run = v.get() + (u - begin) * s;
      for (int64_t i = 0; i < s; ++i) run[i] = (run[i] - m) * rs * scale + shift;
      if constexpr (Relu) {
        for (int64_t i = 0; i < s; ++i) run[i] = run[i] > C(0) ? run[i] : C(0);
      }
    }
    narrow(v.get(), (end - begin) * s, y + begin * s);
  });
}

/// g where y > 0, else 0: ReLU's backward on a chunk of widened g (exact). y is a ReLU's
/// output, +0 or positive (never -0 or NaN), so for the 16-bit formats y > 0 exactly where its
/// bits are not all zero: read as they are, without a widened copy.
template <typename T>
void relu_mask(const T* y, int64_t len, Compute<T>* g) {
  using C = Compute<T>;
  if constexpr (sizeof(T) == 2) {
    for (int64_t i = 0; i < len; ++i) g[i] = y[i].bits != 0 ? g[i] : C(0);
  } else {
    for (int64_t i = 0; i < len; ++i) g[i] = y[i] > T(0) ? g[i] : C(0);
  }
}

/// sum(g) and sum(g xhat) per channel, as [c][2]. relu_y: the output of a batch_norm_relu
/// forward, whose ReLU's backward g passes first; null for a plain batch_norm.
template <typename T, bool Rows>
std::vector<Compute<T>> grad_sums_chunked(const T* x, const T* g, const T* relu_y, Geometry geo,
                                          const Compute<T>* mean, const Compute<T>* rstd) {
  using C = Compute<T>;
  const int64_t s = geo.s;
  return channel_sums<C>(geo, 2, [&](int64_t begin, int64_t end, C* p) {
    if constexpr (Rows && kHalf<T>) {
      for (int64_t u = begin; u < end; ++u) {
        const int64_t c = u % geo.c;
        C sum_g = 0, sum_gx = 0;
        avx512_bf16::batch_norm_grad_sums(half_of<T>(), &x[u * s].bits, &g[u * s].bits,
                                          relu_y != nullptr ? &relu_y[u * s].bits : nullptr, s,
                                          mean[c], rstd[c], sum_g, sum_gx);
        p[2 * c] += sum_g;
        p[2 * c + 1] += sum_gx;
      }
      return;
    }
    const int64_t len = (end - begin) * s;
    const auto xv = chunk_scratch<C>(len), gv = chunk_scratch<C>(len);
    widen(x + begin * s, len, xv.get());
    widen(g + begin * s, len, gv.get());
    if (relu_y != nullptr) relu_mask(relu_y + begin * s, len, gv.get());
    for (int64_t u = begin; u < end; ++u) {
      const int64_t c = u % geo.c;
      const C m = mean[c], rs = rstd[c];
      C* xhat = xv.get() + (u - begin) * s;  // a copy of x: becomes xhat
      const C* gr = gv.get() + (u - begin) * s;
      for (int64_t i = 0; i < s; ++i) xhat[i] = (xhat[i] - m) * rs;
      p[2 * c] += row_sum(gr, s);
      p[2 * c + 1] += row_dot(gr, xhat, s);
    }
  });
}

template <typename T, bool Rows>
void grad_input_chunked(const T* x, const T* g, const T* relu_y, Geometry geo,
                        const Compute<T>* mean, const Compute<T>* rstd,
                        const std::vector<Compute<T>>& w, const std::vector<Compute<T>>& sums,
                        bool training, T* dx) {
  using C = Compute<T>;
  const int64_t s = geo.s;
  const C count = C(geo.per_channel());
  if constexpr (Rows && kHalf<T>) {
    parallel_for(geo.units(), geo.grain(), [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        const int64_t c = u % geo.c;
        avx512_bf16::batch_norm_grad_rows(
            half_of<T>(), &x[u * s].bits, &g[u * s].bits,
            relu_y != nullptr ? &relu_y[u * s].bits : nullptr, &dx[u * s].bits, s, mean[c], rstd[c],
            w.empty() ? 1.0f : w[size_t(c)], sums[size_t(2 * c)] / count,
            sums[size_t(2 * c + 1)] / count, training);
      }
    });
    return;
  }
  parallel_for(geo.units(), geo.grain(), [&](int64_t begin, int64_t end) {
    const int64_t len = (end - begin) * s;
    const auto xv = chunk_scratch<C>(len), gv = chunk_scratch<C>(len);
    widen(x + begin * s, len, xv.get());
    widen(g + begin * s, len, gv.get());
    if (relu_y != nullptr) relu_mask(relu_y + begin * s, len, gv.get());
    for (int64_t u = begin; u < end; ++u) {
      const int64_t c = u % geo.c;
      const C m = mean[c], rs = rstd[c], scale = w.empty() ? C(1) : w[size_t(c)];
      C* xr = xv.get() + (u - begin) * s;
      const C* gr = gv.get() + (u - begin) * s;
      if (training) {
        const C mean_g = sums[size_t(2 * c)] / count, mean_gx = sums[size_t(2 * c + 1)] / count;
        for (int64_t i = 0; i < s; ++i) {
          xr[i] = scale * rs * (gr[i] - mean_g - (xr[i] - m) * rs * mean_gx);
        }
      } else {
        for (int64_t i = 0; i < s; ++i) xr[i] = scale * rs * gr[i];
      }
    }
    narrow(xv.get(), len, dx + begin * s);
  });
}

// ---- the fallback: serial, double ----

template <typename T>
Stats<double> batch_stats_serial(const T* x, Geometry geo, double eps) {
  Stats<double> st;
  st.mean.assign(static_cast<size_t>(geo.c), 0.0);
  st.var.assign(static_cast<size_t>(geo.c), 0.0);
  st.rstd.assign(static_cast<size_t>(geo.c), 0.0);
  for (int64_t u = 0; u < geo.units(); ++u) {
    for (int64_t i = 0; i < geo.s; ++i) st.mean[size_t(u % geo.c)] += to_double(x[u * geo.s + i]);
  }
  for (double& m : st.mean) m /= double(geo.per_channel());
  for (int64_t u = 0; u < geo.units(); ++u) {
    const size_t c = size_t(u % geo.c);
    for (int64_t i = 0; i < geo.s; ++i) {
      const double d = to_double(x[u * geo.s + i]) - st.mean[c];
      st.var[c] += d * d;
    }
  }
  for (size_t c = 0; c < st.var.size(); ++c) {
    st.var[c] /= double(geo.per_channel());
    st.rstd[c] = 1.0 / std::sqrt(st.var[c] + eps);
  }
  return st;
}

template <typename T>
void normalize_serial(const T* x, Geometry geo, const Stats<double>& st,
                      const std::vector<double>& w, const std::vector<double>& b, T* y) {
  for (int64_t u = 0; u < geo.units(); ++u) {
    const size_t c = size_t(u % geo.c);
    const double scale = w.empty() ? 1.0 : w[c], shift = b.empty() ? 0.0 : b[c];
    for (int64_t i = 0; i < geo.s; ++i) {
      const int64_t at = u * geo.s + i;
      y[at] = from_double<T>((to_double(x[at]) - st.mean[c]) * st.rstd[c] * scale + shift);
    }
  }
}

template <typename T>
std::vector<double> grad_sums_serial(const T* x, const T* g, Geometry geo, const Compute<T>* mean,
                                     const Compute<T>* rstd) {
  std::vector<double> sums(static_cast<size_t>(2 * geo.c), 0.0);
  for (int64_t u = 0; u < geo.units(); ++u) {
    const int64_t c = u % geo.c;
    const double m = double(mean[c]), rs = double(rstd[c]);
    for (int64_t i = 0; i < geo.s; ++i) {
      const int64_t at = u * geo.s + i;
      const double gi = to_double(g[at]);
      sums[size_t(2 * c)] += gi;
      sums[size_t(2 * c + 1)] += gi * (to_double(x[at]) - m) * rs;
    }
  }
  return sums;
}

template <typename T>
void grad_input_serial(const T* x, const T* g, Geometry geo, const Compute<T>* mean,
                       const Compute<T>* rstd, const std::vector<double>& w,
                       const std::vector<double>& sums, bool training, T* dx) {
  const double count = double(geo.per_channel());
  for (int64_t u = 0; u < geo.units(); ++u) {
    const int64_t c = u % geo.c;
    const double m = double(mean[c]), rs = double(rstd[c]), scale = w.empty() ? 1.0 : w[size_t(c)];
    const double mean_g = sums[size_t(2 * c)] / count, mean_gx = sums[size_t(2 * c + 1)] / count;
    for (int64_t i = 0; i < geo.s; ++i) {
      const int64_t at = u * geo.s + i;
      const double gi = to_double(g[at]);
      const double xh = (to_double(x[at]) - m) * rs;
      dx[at] =
          from_double<T>(training ? scale * rs * (gi - mean_g - xh * mean_gx) : scale * rs * gi);
    }
  }
}

/// running = (1 - momentum) running + momentum batch, in Acc, stored as f32 with copy_ (which
/// autograd does not record, and which bumps the version so that a saved copy would notice).
template <typename Acc>
void update_running(Tensor& running, const std::vector<Acc>& batch, double momentum) {
  if (!running.defined()) return;
  std::vector<Acc> updated = values_as<Acc>(running);
  for (size_t c = 0; c < updated.size(); ++c) {
    updated[c] = (Acc(1) - Acc(momentum)) * updated[c] + Acc(momentum) * batch[c];
  }
  Tensor rounded =
      empty({int64_t(updated.size())}, DType::f32, MemoryTag::activation, running.device());
  store_channels(updated, 1, 0, rounded);
  running.copy_(rounded);
}

/// The statistics an evaluation normalizes with: the running mean, and rstd from the running
/// variance.
template <typename Acc>
Stats<Acc> running_stats(const Tensor& running_mean, const Tensor& running_var, double eps) {
  Stats<Acc> st;
  st.mean = values_as<Acc>(running_mean);
  st.rstd = values_as<Acc>(running_var);
  for (Acc& r : st.rstd) r = Acc(1) / std::sqrt(r + Acc(eps));
  return st;
}

/// Updates tracked running stats from the batch's: its mean, and its variance made unbiased.
template <typename Acc>
void update_running_stats(const Stats<Acc>& batch, Geometry geo, double momentum,
                          Tensor& running_mean, Tensor& running_var) {
  const Acc unbias = Acc(double(geo.per_channel()) / double(geo.per_channel() - 1));
  std::vector<Acc> unbiased(batch.var.size());
  for (size_t c = 0; c < unbiased.size(); ++c) unbiased[c] = batch.var[c] * unbias;
  update_running(running_mean, batch.mean, momentum);
  update_running(running_var, unbiased, momentum);
}

/// The statistics a forward normalizes with: in training the batch's, the running stats
/// updated from them; in evaluation the running stats.
template <typename T, bool Fallback, bool Rows>
auto forward_stats(const Tensor& x, Geometry geo, BatchNormParams params, Tensor& running_mean,
                   Tensor& running_var) {
  using Acc = std::conditional_t<Fallback, double, Compute<T>>;
  if (!params.training) return running_stats<Acc>(running_mean, running_var, params.eps);
  Stats<Acc> st;
  if constexpr (Fallback) {
    st = batch_stats_serial<T>(x.data<T>(), geo, params.eps);
  } else {
    st = batch_stats_chunked<T, Rows>(x.data<T>(), geo, params.eps);
  }
  update_running_stats(st, geo, params.momentum, running_mean, running_var);
  return st;
}

template <bool Fallback, bool Relu = false, bool Rows = false>
void forward_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& running_mean,
                 Tensor& running_var, BatchNormParams params, Tensor& y, Tensor& mean_out,
                 Tensor& rstd_out) {
  static_assert(!(Fallback && Relu), "the fused fallback is the unfused kernels");
  const Geometry geo = geometry_of(x.shape());
  visit_floating(x.dtype(), "batch_norm", [&]<typename T>() {
    using C = Compute<T>;
    using Acc = std::conditional_t<Fallback, double, C>;
    const Stats<Acc> st =
        forward_stats<T, Fallback, Rows>(x, geo, params, running_mean, running_var);
    const std::vector<Acc> w = values_as<Acc>(weight), b = values_as<Acc>(bias);
    if constexpr (Fallback) {
      normalize_serial<T>(x.data<T>(), geo, st, w, b, y.data<T>());
    } else {
      normalize_chunked<T, Relu, Rows>(x.data<T>(), geo, st, w, b, y.data<T>());
    }
    save_stats<Acc, C>(st, mean_out, rstd_out);
  });
}

/// relu_y: defined for batch_norm_relu's backward (the fast candidates only).
template <bool Fallback, bool Rows = false>
void backward_cpu(const Tensor& x, const Tensor& g, const Tensor& relu_y, const Tensor& weight,
                  const Tensor& mean, const Tensor& rstd, bool training, Tensor& dx,
                  Tensor& dweight, Tensor& dbias) {
  const Geometry geo = geometry_of(x.shape());
  const bool need_sums = (dx.defined() && training) || dweight.defined() || dbias.defined();
  visit_floating(x.dtype(), "batch_norm", [&]<typename T>() {
    using C = Compute<T>;
    using Acc = std::conditional_t<Fallback, double, C>;
    const T* xd = x.data<T>();
    const T* gd = g.data<T>();
    const C* md = mean.data<C>();
    const C* rd = rstd.data<C>();
    std::vector<Acc> sums(static_cast<size_t>(2 * geo.c), Acc(0));  // [c][sum(g), sum(g xhat)]
    if constexpr (Fallback) {
      if (need_sums) sums = grad_sums_serial<T>(xd, gd, geo, md, rd);
      if (dx.defined()) {
        grad_input_serial<T>(xd, gd, geo, md, rd, values_as<double>(weight), sums, training,
                             dx.data<T>());
      }
    } else {
      const T* yd = relu_y.defined() ? relu_y.data<T>() : nullptr;
      if (need_sums) sums = grad_sums_chunked<T, Rows>(xd, gd, yd, geo, md, rd);
      if (dx.defined()) {
        grad_input_chunked<T, Rows>(xd, gd, yd, geo, md, rd, values_as<C>(weight), sums, training,
                                    dx.data<T>());
      }
    }
    if (dweight.defined()) store_channels(sums, 2, 1, dweight);
    if (dbias.defined()) store_channels(sums, 2, 0, dbias);
  });
}

template <bool Fallback, bool Rows = false>
void plain_backward(const Tensor& x, const Tensor& g, const Tensor& weight, const Tensor& mean,
                    const Tensor& rstd, bool training, Tensor& dx, Tensor& dweight, Tensor& dbias) {
  backward_cpu<Fallback, Rows>(x, g, Tensor(), weight, mean, rstd, training, dx, dweight, dbias);
}

template <bool Rows>
void fused_relu_backward(const Tensor& x, const Tensor& y, const Tensor& g, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd, bool training, Tensor& dx,
                         Tensor& dweight, Tensor& dbias) {
  backward_cpu<false, Rows>(x, g, y, weight, mean, rstd, training, dx, dweight, dbias);
}

// Whether the rows candidates apply: to bf16 and f16 inputs.
bool is_half(const Tensor& x, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
             const BatchNormParams&, const Tensor&, const Tensor&, const Tensor&) {
  return x.dtype() == DType::bf16 || x.dtype() == DType::f16;
}
bool is_half_backward(const Tensor& x, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                      const bool&, const Tensor&, const Tensor&, const Tensor&) {
  return x.dtype() == DType::bf16 || x.dtype() == DType::f16;
}
bool is_half_relu_backward(const Tensor& x, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&, const bool&, const Tensor&, const Tensor&,
                           const Tensor&) {
  return x.dtype() == DType::bf16 || x.dtype() == DType::f16;
}

// The unfused ops' kernels in turn: batch_norm_forward, then ReLU (max(y, 0) in y's dtype, as
// ops::relu) over its output.
void unfused_relu_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                          Tensor& running_mean, Tensor& running_var, BatchNormParams params,
                          Tensor& y, Tensor& mean_out, Tensor& rstd_out) {
  batch_norm_forward(x, weight, bias, running_mean, running_var, params, y, mean_out, rstd_out);
  visit_floating(y.dtype(), "batch_norm_relu", [&]<typename T>() {
    T* yd = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) {
      yd[i] = to_double(yd[i]) > 0.0 ? yd[i] : from_double<T>(0.0);
    }
  });
}

// ReLU's backward (g where y > 0, else 0, as ops::relu's backward from its input: y > 0 exactly
// where batch_norm's output is), then batch_norm_backward.
void unfused_relu_backward(const Tensor& x, const Tensor& y, const Tensor& g, const Tensor& weight,
                           const Tensor& mean, const Tensor& rstd, bool training, Tensor& dx,
                           Tensor& dweight, Tensor& dbias) {
  Tensor masked = empty(g.shape(), g.dtype(), MemoryTag::workspace, g.device());
  visit_floating(g.dtype(), "batch_norm_relu", [&]<typename T>() {
    const T* yd = y.data<T>();
    const T* gd = g.data<T>();
    T* md = masked.data<T>();
    for (int64_t i = 0; i < g.numel(); ++i) {
      md[i] = to_double(yd[i]) > 0.0 ? gd[i] : from_double<T>(0.0);
    }
  });
  batch_norm_backward(x, masked, weight, mean, rstd, training, dx, dweight, dbias);
}

}  // namespace

template <typename T, bool Rows>
batch_norm_chunks::Stats<Compute<T>> batch_norm_chunks::fast_forward_stats(
    const Tensor& x, Geometry geo, BatchNormParams params, Tensor& running_mean,
    Tensor& running_var) {
  return forward_stats<T, false, Rows>(x, geo, params, running_mean, running_var);
}
template batch_norm_chunks::Stats<float> batch_norm_chunks::fast_forward_stats<float, false>(
    const Tensor&, Geometry, BatchNormParams, Tensor&, Tensor&);
template batch_norm_chunks::Stats<double> batch_norm_chunks::fast_forward_stats<double, false>(
    const Tensor&, Geometry, BatchNormParams, Tensor&, Tensor&);
template batch_norm_chunks::Stats<float> batch_norm_chunks::fast_forward_stats<bfloat16, false>(
    const Tensor&, Geometry, BatchNormParams, Tensor&, Tensor&);
template batch_norm_chunks::Stats<float> batch_norm_chunks::fast_forward_stats<float16, false>(
    const Tensor&, Geometry, BatchNormParams, Tensor&, Tensor&);
template batch_norm_chunks::Stats<float> batch_norm_chunks::fast_forward_stats<bfloat16, true>(
    const Tensor&, Geometry, BatchNormParams, Tensor&, Tensor&);
template batch_norm_chunks::Stats<float> batch_norm_chunks::fast_forward_stats<float16, true>(
    const Tensor&, Geometry, BatchNormParams, Tensor&, Tensor&);

Kernel<BatchNormFn> batch_norm_forward(
    "batch_norm_forward", {{.name = "half_rows",
                            .isa = Isa::avx512_bf16,
                            .applies = is_half,
                            .fn = forward_cpu<false, false, true>},
                           {.name = "openmp", .fn = forward_cpu<false>},
                           {.name = "scalar", .fn = forward_cpu<true>, .fallback = true}});

Kernel<BatchNormBackwardFn> batch_norm_backward(
    "batch_norm_backward", {{.name = "half_rows",
                             .isa = Isa::avx512_bf16,
                             .applies = is_half_backward,
                             .fn = plain_backward<false, true>},
                            {.name = "openmp", .fn = plain_backward<false>},
                            {.name = "scalar", .fn = plain_backward<true>, .fallback = true}});

Kernel<BatchNormFn> batch_norm_relu_forward(
    "batch_norm_relu_forward", {{.name = "half_rows_fused",
                                 .isa = Isa::avx512_bf16,
                                 .applies = is_half,
                                 .fn = forward_cpu<false, true, true>},
                                {.name = "openmp_fused", .fn = forward_cpu<false, true>},
                                {.name = "unfused", .fn = unfused_relu_forward, .fallback = true}});

Kernel<BatchNormReluBackwardFn> batch_norm_relu_backward(
    "batch_norm_relu_backward",
    {{.name = "half_rows_fused",
      .isa = Isa::avx512_bf16,
      .applies = is_half_relu_backward,
      .fn = fused_relu_backward<true>},
     {.name = "openmp_fused", .fn = fused_relu_backward<false>},
     {.name = "unfused", .fn = unfused_relu_backward, .fallback = true}});

}  // namespace mixp::kernels