// The CPU candidates of kernels/layer_norm.h: rows split over the threads, each through the
// fp32 row kernels of kernels/layer_norm_rows.h (f64 rows here, in the same steps); and the
// fallback, one thread computing every row in double.
#include "kernels/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "kernels/elementwise.h"
#include "kernels/layer_norm_rows.h"
#include "kernels/row_sums.h"

namespace mixp::kernels {
namespace {

struct Rows {
  int64_t rows, n;  // x viewed as [rows, n]
};

// Row `row` of x in the compute dtype: x itself when it is stored so, else widened into `buffer`.
template <typename T>
const Compute<T>* compute_row(const T* x, int64_t row, int64_t n, std::vector<Compute<T>>& buffer) {
  if constexpr (std::is_same_v<T, Compute<T>>) {
    return x + row * n;
  } else {
    widen(x + row * n, n, buffer.data());
    return buffer.data();
  }
}

// One row in f64: the fp32 rows go to kernels/layer_norm_rows.h, which computes these steps.
void forward_row_f64(const double* xr, int64_t n, const std::vector<double>& w,
                     const std::vector<double>& b, double eps, std::vector<double>& v, double* y,
                     double& mean, double& rstd) {
  mean = row_sum<double>(xr, n) / double(n);
  for (int64_t j = 0; j < n; ++j) v[size_t(j)] = xr[j] - mean;
  rstd = 1.0 / std::sqrt(row_dot<double>(v.data(), v.data(), n) / double(n) + eps);
  for (int64_t j = 0; j < n; ++j) {
    double o = v[size_t(j)] * rstd;
    if (!w.empty()) o *= w[size_t(j)];
    if (!b.empty()) o += b[size_t(j)];
    y[j] = o;
  }
}

template <typename T, typename Y>
void forward_fast(const T* x, Rows r, const std::vector<Compute<T>>& w,
                  const std::vector<Compute<T>>& b, double eps, Y* y, Compute<T>* mean,
                  Compute<T>* rstd) {
  using C = Compute<T>;
  const int64_t n = r.n;
  const int64_t grain = std::max<int64_t>(1, 4 * kBlock / n);
  const C* wp = w.empty() ? nullptr : w.data();
  const C* bp = b.empty() ? nullptr : b.data();
  parallel_for(r.rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<C> v(static_cast<size_t>(n));  // x widened, x - mean, then a narrower output
    for (int64_t row = begin; row < end; ++row) {
      const C* xr = compute_row(x, row, n, v);
      Y* yr = y + row * n;
      if constexpr (std::is_same_v<C, double>) {
        forward_row_f64(xr, n, w, b, eps, v, yr, mean[row], rstd[row]);
      } else {
        NormStats s;
        if constexpr (std::is_same_v<Y, float>) {
          s = layer_norm_row_f32(xr, n, wp, bp, float(eps), v.data(), yr);
        } else if constexpr (std::is_same_v<Y, bfloat16>) {
          s = layer_norm_row_bf16(xr, n, wp, bp, float(eps), v.data(),
                                  reinterpret_cast<uint16_t*>(yr));
        } else {  // f16: rounded by the conversion kernels
          s = layer_norm_row_f32(xr, n, wp, bp, float(eps), v.data(), v.data());
          narrow(v.data(), n, yr);
        }
        mean[row] = s.mean;
        rstd[row] = s.rstd;
      }
    }
  });
}

template <typename T, typename Y>
void forward_fallback(const T* x, Rows r, const std::vector<double>& w,
                      const std::vector<double>& b, double eps, Y* y, Compute<T>* mean,
                      Compute<T>* rstd) {
  using C = Compute<T>;
  const int64_t n = r.n;
  for (int64_t row = 0; row < r.rows; ++row) {
    const T* xr = x + row * n;
    double m = 0;
    for (int64_t j = 0; j < n; ++j) m += to_double(xr[j]);
    m /= double(n);
    double sq = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = to_double(xr[j]) - m;
      sq += d * d;
    }
    const double rs = 1.0 / std::sqrt(sq / double(n) + eps);
    for (int64_t j = 0; j < n; ++j) {
      double out = (to_double(xr[j]) - m) * rs;
      if (!w.empty()) out *= w[size_t(j)];
      if (!b.empty()) out += b[size_t(j)];
      y[row * n + j] = from_double<Y>(out);
    }
    mean[row] = C(m);
    rstd[row] = C(rs);
  }
}

/// The gradients one backward produces; dx is null when x needs none.
template <typename T, typename Acc>
struct Grads {
  T* dx;
  std::vector<Acc>& dweight;  // sum of g * xhat over rows, [n]
  std::vector<Acc>& dbias;    // sum of g over rows, [n]
};

// One row in f64: the fp32 rows go to kernels/layer_norm_rows.h, which computes these steps.
void backward_row_f64(const double* x, const double* g, const double* weight, double m, double rs,
                      int64_t n, double* xh, double* gw, double* pw, double* pb, double* dx) {
  for (int64_t j = 0; j < n; ++j) {
    xh[j] = (x[j] - m) * rs;
    pw[j] += g[j] * xh[j];
    pb[j] += g[j];
    gw[j] = weight == nullptr ? g[j] : g[j] * weight[j];
  }
  if (dx == nullptr) return;
  const double mean_gw = row_sum<double>(gw, n) / double(n);
  const double mean_gwx = row_dot<double>(gw, xh, n) / double(n);
  for (int64_t j = 0; j < n; ++j) dx[j] = rs * (gw[j] - mean_gw - xh[j] * mean_gwx);
}

template <typename T, typename G>
void backward_fast(const T* x, const G* g, const Compute<T>* mean, const Compute<T>* rstd, Rows r,
                   const std::vector<Compute<T>>& w, Grads<T, Compute<T>> out) {
  using C = Compute<T>;
  constexpr bool kStoredInCompute = std::is_same_v<T, C>;
  const int64_t n = r.n;
  const C* wp = w.empty() ? nullptr : w.data();
  // Fixed chunks of rows, each with its own dweight/dbias partials, added in chunk order: the
  // result does not depend on the thread count.
  const int64_t grain = layer_norm_backward_grain(r.rows, n);
  const int64_t chunks = (r.rows + grain - 1) / grain;
  std::vector<C> part_w(static_cast<size_t>(chunks * n), C(0)),
      part_b(static_cast<size_t>(chunks * n), C(0));
  parallel_for(r.rows, grain, [&](int64_t begin, int64_t end) {
    C* pw = part_w.data() + (begin / grain) * n;
    C* pb = part_b.data() + (begin / grain) * n;
    // Widened x (then dx when T is narrower), widened g (not a bf16 g of an fp32 x: the kernel
    // widens it in registers), xhat and g * weight of one row.
    std::vector<C> xv(static_cast<size_t>(n));
    constexpr bool kWidensG = std::is_same_v<G, bfloat16> && std::is_same_v<C, float>;
    std::vector<Compute<G>> gv(kWidensG ? 0 : static_cast<size_t>(n));
    std::vector<C> xh(static_cast<size_t>(n)), gw(static_cast<size_t>(n));
    for (int64_t row = begin; row < end; ++row) {
      const C* xr = compute_row(x, row, n, xv);
      C* dx = !out.dx            ? nullptr
              : kStoredInCompute ? reinterpret_cast<C*>(out.dx + row * n)
                                 : xv.data();
      if constexpr (std::is_same_v<C, double>) {
        backward_row_f64(xr, compute_row(g, row, n, gv), wp, mean[row], rstd[row], n, xh.data(),
                         gw.data(), pw, pb, dx);
      } else {
        const NormStats s{.mean = mean[row], .rstd = rstd[row]};
        const NormBackwardRow rows{
            .xhat = xh.data(), .gw = gw.data(), .pw = pw, .pb = pb, .dx = dx};
        if constexpr (std::is_same_v<G, bfloat16>) {  // widened in the kernel's registers
          layer_norm_backward_row_bf16(xr, reinterpret_cast<const uint16_t*>(g + row * n), wp, s, n,
                                       rows);
        } else {
          layer_norm_backward_row_f32(xr, compute_row(g, row, n, gv), wp, s, n, rows);
        }
      }
      if constexpr (!kStoredInCompute) {
        if (dx != nullptr) narrow(xv.data(), n, out.dx + row * n);
      }
    }
  });
  add_chunk_partials(part_w, chunks, n, out.dweight);
  add_chunk_partials(part_b, chunks, n, out.dbias);
}

template <typename T, typename G>
void backward_fallback(const T* x, const G* g, const Compute<T>* mean, const Compute<T>* rstd,
                       Rows r, const std::vector<double>& w, Grads<T, double> out) {
  const int64_t n = r.n;
  for (int64_t row = 0; row < r.rows; ++row) {
    const T* xr = x + row * n;
    const G* gr = g + row * n;
    const double m = double(mean[row]), rs = double(rstd[row]);
    double sum_gw = 0, sum_gwx = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double xh = (to_double(xr[j]) - m) * rs, gj = to_double(gr[j]);
      const double gw = w.empty() ? gj : gj * w[size_t(j)];
      sum_gw += gw;
      sum_gwx += gw * xh;
      out.dweight[size_t(j)] += gj * xh;
      out.dbias[size_t(j)] += gj;
    }
    if (!out.dx) continue;
    const double mean_gw = sum_gw / double(n), mean_gwx = sum_gwx / double(n);
    for (int64_t j = 0; j < n; ++j) {
      const double xh = (to_double(xr[j]) - m) * rs, gj = to_double(gr[j]);
      const double gw = w.empty() ? gj : gj * w[size_t(j)];
      out.dx[row * n + j] = from_double<T>(rs * (gw - mean_gw - xh * mean_gwx));
    }
  }
}

// Calls f.template operator()<T, Y>() for x's dtype T and the result's dtype Y: the same, or
// bf16 or f16 for an f32 x (an explicit out_dtype; layer_norm checks the pair).
template <typename F>
void visit_pair(DType x_dtype, DType y_dtype, F&& f) {
  if (x_dtype == y_dtype) {
    visit_floating(x_dtype, "layer_norm", [&]<typename T>() { f.template operator()<T, T>(); });
  } else if (y_dtype == DType::bf16) {
    f.template operator()<float, bfloat16>();
  } else {
    f.template operator()<float, float16>();
  }
}

template <bool Fallback>
void layer_norm_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                    Tensor& y, Tensor& mean, Tensor& rstd) {
  const Rows r{.rows = x.numel() / x.size(-1), .n = x.size(-1)};
  visit_pair(x.dtype(), y.dtype(), [&]<typename T, typename Y>() {
    using C = Compute<T>;
    if constexpr (Fallback) {
      forward_fallback<T, Y>(x.data<T>(), r, values_as<double>(weight), values_as<double>(bias),
                             eps, y.data<Y>(), mean.data<C>(), rstd.data<C>());
    } else {
      forward_fast<T, Y>(x.data<T>(), r, values_as<C>(weight), values_as<C>(bias), eps, y.data<Y>(),
                         mean.data<C>(), rstd.data<C>());
    }
  });
}

template <bool Fallback>
void layer_norm_backward_cpu(const Tensor& x, const Tensor& g, const Tensor& weight,
                             const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dweight,
                             Tensor& dbias) {
  const Rows r{.rows = x.numel() / x.size(-1), .n = x.size(-1)};
  visit_pair(x.dtype(), g.dtype(), [&]<typename T, typename G>() {
    using C = Compute<T>;
    using Acc = std::conditional_t<Fallback, double, C>;
    T* dx_data = dx.defined() ? dx.data<T>() : nullptr;
    std::vector<Acc> sum_w(static_cast<size_t>(r.n), Acc(0)),
        sum_b(static_cast<size_t>(r.n), Acc(0));
    const Grads<T, Acc> out{.dx = dx_data, .dweight = sum_w, .dbias = sum_b};
    if constexpr (Fallback) {
      backward_fallback<T, G>(x.data<T>(), g.data<G>(), mean.data<C>(), rstd.data<C>(), r,
                              values_as<double>(weight), out);
    } else {
      backward_fast<T, G>(x.data<T>(), g.data<G>(), mean.data<C>(), rstd.data<C>(), r,
                          values_as<C>(weight), out);
    }
    store_values(sum_w, dweight);
    store_values(sum_b, dbias);
  });
}

}  // namespace

int64_t layer_norm_backward_grain(int64_t rows, int64_t n) {
  return std::max((rows + 63) / 64, std::max<int64_t>(1, 4 * kBlock / n));
}

Kernel<LayerNormFn> layer_norm("layer_norm",
                               {{.name = "openmp", .fn = layer_norm_cpu<false>},
                                {.name = "scalar", .fn = layer_norm_cpu<true>, .fallback = true}});

Kernel<LayerNormBackwardFn> layer_norm_backward(
    "layer_norm_backward",
    {{.name = "openmp", .fn = layer_norm_backward_cpu<false>},
     {.name = "scalar", .fn = layer_norm_backward_cpu<true>, .fallback = true}});

}  // namespace mixp::kernels
