// layer_norm: y = (x - mean) * rstd * weight + bias over the last dimension, with mean and the
// biased variance of each row and rstd = 1 / sqrt(var + eps), computed in fp32 (f64 for f64
// inputs); the result has x's dtype (or out_dtype: bf16 or f16 for an f32 x), rounded once.
// Shape contract: x [..., C] with C >= 1; weight and bias [C] (any floating dtype each) or
// undefined (no scale, no shift); the result has x's shape. Its gradient is read in its dtype.
// Backward, with xhat = (x - mean) * rstd and gw = g * weight (g without weight):
//   dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) per row,
//   dweight = sum over rows of g * xhat, dbias = sum over rows of g, accumulated in fp32 (f64
//   for f64) and returned in the weight's and the bias's dtype.
// Saved: x in its dtype, and the per-row mean and rstd in fp32 (f64 for f64).
#include <cmath>
#include <optional>
#include <type_traits>

#include "kernels/layer_norm_rows.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct Rows {
  int64_t rows, n;  // x viewed as [rows, n]
};

// Row `row` of x in the compute dtype: x itself when it is stored so, else widened into `buffer`.
template <typename T>
const kernels::Compute<T>* compute_row(const T* x, int64_t row, int64_t n,
                                       std::vector<kernels::Compute<T>>& buffer) {
  if constexpr (std::is_same_v<T, kernels::Compute<T>>) {
    return x + row * n;
  } else {
    kernels::widen(x + row * n, n, buffer.data());
    return buffer.data();
  }
}

// One row in f64: the fp32 rows go to kernels/layer_norm_rows.h, which computes these steps.
void forward_row_f64(const double* xr, int64_t n, const std::vector<double>& w,
                     const std::vector<double>& b, double eps, std::vector<double>& v, double* y,
                     double& mean, double& rstd) {
  mean = detail::row_sum(xr, n) / double(n);
  for (int64_t j = 0; j < n; ++j) v[size_t(j)] = xr[j] - mean;
  rstd = 1.0 / std::sqrt(detail::row_dot(v.data(), v.data(), n) / double(n) + eps);
  for (int64_t j = 0; j < n; ++j) {
    double o = v[size_t(j)] * rstd;
    if (!w.empty()) o *= w[size_t(j)];
    if (!b.empty()) o += b[size_t(j)];
    y[j] = o;
  }
}

template <typename T, typename Y>
void forward_fast(const T* x, Rows r, const std::vector<kernels::Compute<T>>& w,
                  const std::vector<kernels::Compute<T>>& b, double eps, Y* y,
                  kernels::Compute<T>* mean, kernels::Compute<T>* rstd) {
  using C = kernels::Compute<T>;
  const int64_t n = r.n;
  const int64_t grain = std::max<int64_t>(1, 4 * kernels::kBlock / n);
  const C* wp = w.empty() ? nullptr : w.data();
  const C* bp = b.empty() ? nullptr : b.data();
  kernels::parallel_for(r.rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<C> v(static_cast<size_t>(n));  // x widened, x - mean, then a narrower output
    for (int64_t row = begin; row < end; ++row) {
      const C* xr = compute_row(x, row, n, v);
      Y* yr = y + row * n;
      if constexpr (std::is_same_v<C, double>) {
        forward_row_f64(xr, n, w, b, eps, v, yr, mean[row], rstd[row]);
      } else {
        kernels::NormStats s;
        if constexpr (std::is_same_v<Y, float>) {
          s = kernels::layer_norm_row_f32(xr, n, wp, bp, float(eps), v.data(), yr);
        } else if constexpr (std::is_same_v<Y, bfloat16>) {
          s = kernels::layer_norm_row_bf16(xr, n, wp, bp, float(eps), v.data(),
                                           reinterpret_cast<uint16_t*>(yr));
        } else {  // f16: rounded by the conversion kernels
          s = kernels::layer_norm_row_f32(xr, n, wp, bp, float(eps), v.data(), v.data());
          kernels::narrow(v.data(), n, yr);
        }
        mean[row] = s.mean;
        rstd[row] = s.rstd;
      }
    }
  });
}

template <typename T, typename Y>
void forward_reference(const T* x, Rows r, const std::vector<double>& w,
                       const std::vector<double>& b, double eps, Y* y, kernels::Compute<T>* mean,
                       kernels::Compute<T>* rstd) {
  using C = kernels::Compute<T>;
  const int64_t n = r.n;
  for (int64_t row = 0; row < r.rows; ++row) {
    const T* xr = x + row * n;
    double m = 0;
    for (int64_t j = 0; j < n; ++j) m += kernels::to_double(xr[j]);
    m /= double(n);
    double sq = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = kernels::to_double(xr[j]) - m;
      sq += d * d;
    }
    const double rs = 1.0 / std::sqrt(sq / double(n) + eps);
    for (int64_t j = 0; j < n; ++j) {
      double out = (kernels::to_double(xr[j]) - m) * rs;
      if (!w.empty()) out *= w[size_t(j)];
      if (!b.empty()) out += b[size_t(j)];
      y[row * n + j] = kernels::from_double<Y>(out);
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
  const double mean_gw = detail::row_sum(gw, n) / double(n);
  const double mean_gwx = detail::row_dot(gw, xh, n) / double(n);
  for (int64_t j = 0; j < n; ++j) dx[j] = rs * (gw[j] - mean_gw - xh[j] * mean_gwx);
}

template <typename T, typename G>
void backward_fast(const T* x, const G* g, const kernels::Compute<T>* mean,
                   const kernels::Compute<T>* rstd, Rows r,
                   const std::vector<kernels::Compute<T>>& w, Grads<T, kernels::Compute<T>> out) {
  using C = kernels::Compute<T>;
  constexpr bool kStoredInCompute = std::is_same_v<T, C>;
  const int64_t n = r.n;
  const C* wp = w.empty() ? nullptr : w.data();
  // Fixed chunks of rows, each with its own dweight/dbias partials, added in chunk order: the
  // result does not depend on the thread count.
  const int64_t grain = std::max((r.rows + 63) / 64, std::max<int64_t>(1, 4 * kernels::kBlock / n));
  const int64_t chunks = (r.rows + grain - 1) / grain;
  std::vector<C> part_w(static_cast<size_t>(chunks * n), C(0)),
      part_b(static_cast<size_t>(chunks * n), C(0));
  kernels::parallel_for(r.rows, grain, [&](int64_t begin, int64_t end) {
    C* pw = part_w.data() + (begin / grain) * n;
    C* pb = part_b.data() + (begin / grain) * n;
    // Widened x (then dx when T is narrower), widened g (not a bf16 g of an fp32 x: the kernel
    // widens it in registers), xhat and g * weight of one row.
    std::vector<C> xv(static_cast<size_t>(n));
    constexpr bool kWidensG = std::is_same_v<G, bfloat16> && std::is_same_v<C, float>;
    std::vector<kernels::Compute<G>> gv(kWidensG ? 0 : static_cast<size_t>(n));
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
        const kernels::NormStats s{.mean = mean[row], .rstd = rstd[row]};
        const kernels::NormBackwardRow rows{
            .xhat = xh.data(), .gw = gw.data(), .pw = pw, .pb = pb, .dx = dx};
        if constexpr (std::is_same_v<G, bfloat16>) {  // widened in the kernel's registers
          kernels::layer_norm_backward_row_bf16(xr, reinterpret_cast<const uint16_t*>(g + row * n),
                                                wp, s, n, rows);
        } else {
          kernels::layer_norm_backward_row_f32(xr, compute_row(g, row, n, gv), wp, s, n, rows);
        }
      }
      if constexpr (!kStoredInCompute) {
        if (dx != nullptr) kernels::narrow(xv.data(), n, out.dx + row * n);
      }
    }
  });
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t j = 0; j < n; ++j) {
      out.dweight[size_t(j)] += part_w[size_t(c * n + j)];
      out.dbias[size_t(j)] += part_b[size_t(c * n + j)];
    }
  }
}

template <typename T, typename G>
void backward_reference(const T* x, const G* g, const kernels::Compute<T>* mean,
                        const kernels::Compute<T>* rstd, Rows r, const std::vector<double>& w,
                        Grads<T, double> out) {
  const int64_t n = r.n;
  for (int64_t row = 0; row < r.rows; ++row) {
    const T* xr = x + row * n;
    const G* gr = g + row * n;
    const double m = double(mean[row]), rs = double(rstd[row]);
    double sum_gw = 0, sum_gwx = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double xh = (kernels::to_double(xr[j]) - m) * rs, gj = kernels::to_double(gr[j]);
      const double gw = w.empty() ? gj : gj * w[size_t(j)];
      sum_gw += gw;
      sum_gwx += gw * xh;
      out.dweight[size_t(j)] += gj * xh;
      out.dbias[size_t(j)] += gj;
    }
    if (!out.dx) continue;
    const double mean_gw = sum_gw / double(n), mean_gwx = sum_gwx / double(n);
    for (int64_t j = 0; j < n; ++j) {
      const double xh = (kernels::to_double(xr[j]) - m) * rs, gj = kernels::to_double(gr[j]);
      const double gw = w.empty() ? gj : gj * w[size_t(j)];
      out.dx[row * n + j] = kernels::from_double<T>(rs * (gw - mean_gw - xh * mean_gwx));
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

struct LayerNormBackward : autograd::Node {
  autograd::SavedTensor x, weight, mean, rstd;
  DType weight_dtype = DType::f32, bias_dtype = DType::f32, y_dtype = DType::f32;
  bool has_bias = false;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor xv = x.get(), wv = weight.get(), mv = mean.get(), rv = rstd.get();
    // g in the result's dtype, read widened as it is (a bf16 result's gradient needs no fp32 copy).
    const Tensor g = grads[0].dtype() == y_dtype ? grads[0] : grads[0].to(y_dtype).detach();
    const Rows r{.rows = xv.numel() / xv.size(-1), .n = xv.size(-1)};
    const bool want_dx = next[0].node != nullptr;
    const bool want_dw = wv.defined() && next[1].node, want_db = has_bias && next[2].node;
    Tensor dx = want_dx ? detail::empty_like(xv) : Tensor(), dw, db;
    visit_pair(xv.dtype(), y_dtype, [&]<typename T, typename G>() {
      using C = kernels::Compute<T>;
      T* dx_data = want_dx ? dx.data<T>() : nullptr;
      if (reference_mode()) {
        std::vector<double> sum_w(static_cast<size_t>(r.n), 0.0),
            sum_b(static_cast<size_t>(r.n), 0.0);
        backward_reference<T, G>(xv.data<T>(), g.data<G>(), mv.data<C>(), rv.data<C>(), r,
                                 detail::values_as<double>(wv),
                                 {.dx = dx_data, .dweight = sum_w, .dbias = sum_b});
        if (want_dw) dw = detail::tensor_from(sum_w, weight_dtype);
        if (want_db) db = detail::tensor_from(sum_b, bias_dtype);
      } else {
        std::vector<C> sum_w(static_cast<size_t>(r.n), C(0)), sum_b(static_cast<size_t>(r.n), C(0));
        backward_fast<T, G>(xv.data<T>(), g.data<G>(), mv.data<C>(), rv.data<C>(), r,
                            detail::values_as<C>(wv),
                            {.dx = dx_data, .dweight = sum_w, .dbias = sum_b});
        if (want_dw) dw = detail::tensor_from(sum_w, weight_dtype);
        if (want_db) db = detail::tensor_from(sum_b, bias_dtype);
      }
    });
    return {dx, dw, db};
  }
  void release() override {
    x.reset();
    weight.reset();
    mean.reset();
    rstd.reset();
  }
};

void check_affine(const Tensor& x, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  detail::check_floating("layer_norm", t, what);
  MIXP_CHECK(t.ndim() == 1 && t.size(0) == x.size(-1), "layer_norm: the ", what, " must be [",
             x.size(-1), "] for input ", x.shape().to_string(), ", got ", t.shape().to_string());
}

}  // namespace

Tensor layer_norm(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, double eps,
                  std::optional<DType> out_dtype) {
  const auto cast = amp::autocast_inputs(OpKind::layer_norm, {&x_in, &weight_in, &bias_in});
  const Tensor &x = cast[0], &weight = cast[1], &bias = cast[2];
  detail::check_floating("layer_norm", x);
  MIXP_CHECK(x.ndim() >= 1 && x.size(-1) >= 1,
             "layer_norm: the input must be [..., C] with C >= 1, got ", x.shape().to_string());
  MIXP_CHECK(std::isfinite(eps) && eps >= 0,
             "layer_norm: eps must be finite and non-negative, got ", eps);
  check_affine(x, weight, "weight");
  check_affine(x, bias, "bias");
  const DType y_dtype = out_dtype.value_or(x.dtype());
  MIXP_CHECK(y_dtype == x.dtype() ||
                 (x.dtype() == DType::f32 && (y_dtype == DType::bf16 || y_dtype == DType::f16)),
             "layer_norm: out_dtype must be the input's dtype (", name_of(x.dtype()),
             ") or, for an f32 input, bf16 or f16; got ", name_of(y_dtype));
  const Rows r{.rows = x.numel() / x.size(-1), .n = x.size(-1)};
  std::vector<int64_t> row_dims(x.shape().dims().begin(), x.shape().dims().end() - 1);
  Tensor y = empty(x.shape(), y_dtype);
  Tensor mean = empty(Shape(row_dims), detail::accumulation_dtype(x.dtype()));
  Tensor rstd = empty(Shape(row_dims), detail::accumulation_dtype(x.dtype()));
  visit_pair(x.dtype(), y_dtype, [&]<typename T, typename Y>() {
    using C = kernels::Compute<T>;
    if (reference_mode()) {
      forward_reference<T, Y>(x.data<T>(), r, detail::values_as<double>(weight),
                              detail::values_as<double>(bias), eps, y.data<Y>(), mean.data<C>(),
                              rstd.data<C>());
    } else {
      forward_fast<T, Y>(x.data<T>(), r, detail::values_as<C>(weight), detail::values_as<C>(bias),
                         eps, y.data<Y>(), mean.data<C>(), rstd.data<C>());
    }
  });
  if (auto node = autograd::make_node<LayerNormBackward>("layer_norm", {&x, &weight, &bias})) {
    node->x = autograd::SavedTensor(x);
    node->weight = autograd::SavedTensor(weight);
    node->mean = autograd::SavedTensor(mean);
    node->rstd = autograd::SavedTensor(rstd);
    if (weight.defined()) node->weight_dtype = weight.dtype();
    if (bias.defined()) node->bias_dtype = bias.dtype();
    node->y_dtype = y_dtype;
    node->has_bias = bias.defined();
    autograd::set_history(y, node);
  }
  // An explicit out_dtype is kept; otherwise the policy's rule applies.
  return out_dtype ? y : cast.output(y);
}

}  // namespace mixp::ops
