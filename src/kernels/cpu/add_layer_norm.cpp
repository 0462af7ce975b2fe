// The CPU candidates of kernels/add_layer_norm.h. A transformer's residual stream is read and
// written once per add instead of three times: the fast candidate takes each row of the sum
// while it is in L1 to the fp32 row kernels of kernels/layer_norm_rows.h, the same ones
// layer_norm's candidate runs, and in backward adds the other use's gradient to the row's
// input gradient and rounds it for the add's narrow input on the way out. Rows are split over
// the threads in layer_norm's chunks, so dweight and dbias are the same sums in the same order.
// The fallback runs add_forward and layer_norm (or layer_norm_backward and the sum) in turn.
#include "kernels/add_layer_norm.h"

#include <algorithm>
#include <vector>

#include "core/parallel.h"
#include "kernels/elementwise.h"
#include "kernels/elementwise_ops.h"
#include "kernels/layer_norm.h"
#include "kernels/layer_norm_rows.h"
#include "kernels/row_sums.h"

namespace mixp::kernels {
namespace {

bool is_narrow(DType d) { return d == DType::bf16 || d == DType::f16; }

// An fp32 operand beside an fp32, bf16 or f16 one, into an fp32 sum and a y of fp32, bf16 or
// f16: what the rows below compute.
bool rows_apply(const Tensor& a, const Tensor& b, const Tensor&, const Tensor&, const double&,
                const Tensor& sum, const Tensor& y, const Tensor&, const Tensor&) {
  const bool operands =
      (a.dtype() == DType::f32 && (b.dtype() == DType::f32 || is_narrow(b.dtype()))) ||
      (b.dtype() == DType::f32 && is_narrow(a.dtype()));
  return operands && sum.dtype() == DType::f32 && (y.dtype() == DType::f32 || is_narrow(y.dtype()));
}

// n values of an fp32, bf16 or f16 operand as fp32: x itself, or widened exactly into `buffer`.
template <typename T>
const float* as_f32(const T* x, int64_t n, float* buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    widen(x, n, buffer);
    return buffer;
  }
}

// out[0, n) = a + b in fp32, a narrow operand widened first (into `buffer`, n floats):
// add_forward's sums, in its order (which decides the payload of a NaN sum of two NaNs).
template <typename A, typename B>
void add_values(const A* a, const B* b, int64_t n, float* buffer, float* out) {
  const float* x = as_f32(a, n, buffer);
  const float* y = as_f32(b, n, buffer);  // at most one of them is narrow
  for (int64_t j = 0; j < n; ++j) out[j] = x[j] + y[j];
}

// One row of y from its sum s, as layer_norm's fast candidate computes it.
template <typename Y>
NormStats normalize_row(const float* s, int64_t n, const float* w, const float* b, float eps,
                        float* v, Y* y) {
  if constexpr (std::is_same_v<Y, float>) {
    return layer_norm_row_f32(s, n, w, b, eps, v, y);
  } else if constexpr (std::is_same_v<Y, bfloat16>) {
    return layer_norm_row_bf16(s, n, w, b, eps, v, reinterpret_cast<uint16_t*>(y));
  } else {
    const NormStats stats = layer_norm_row_f32(s, n, w, b, eps, v, v);
    narrow(v, n, y);
    return stats;
  }
}

template <typename A, typename B, typename Y>
void forward_rows(const A* a, const B* b, int64_t rows, int64_t n, const std::vector<float>& w,
                  const std::vector<float>& shift, float eps, float* sum, Y* y, float* mean,
                  float* rstd) {
  const float* wp = w.empty() ? nullptr : w.data();
  const float* bp = shift.empty() ? nullptr : shift.data();
  parallel_for(rows, std::max<int64_t>(1, 4 * kBlock / n), [&](int64_t begin, int64_t end) {
    // The chunk's sums at once (about 4K values, in L1), which the rows then normalize: one
    // conversion call per chunk rather than per row.
    const int64_t values = (end - begin) * n;
    constexpr bool kWidens = !std::is_same_v<A, float> || !std::is_same_v<B, float>;
    std::vector<float> widened(kWidens ? static_cast<size_t>(values) : 0),
        v(static_cast<size_t>(n));
    add_values(a + begin * n, b + begin * n, values, widened.data(), sum + begin * n);
    for (int64_t row = begin; row < end; ++row) {
      const float* s = sum + row * n;
      const NormStats stats = normalize_row(s, n, wp, bp, eps, v.data(), y + row * n);
      mean[row] = stats.mean;
      rstd[row] = stats.rstd;
    }
  });
}

// Calls f.template operator()<T>() for the storage type of an fp32, bf16 or f16 dtype.
template <typename F>
void visit_f32_or_narrow(DType d, F&& f) {
  if (d == DType::f32) {
    f.template operator()<float>();
  } else if (d == DType::bf16) {
    f.template operator()<bfloat16>();
  } else {
    f.template operator()<float16>();
  }
}

void add_layer_norm_rows(const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias,
                         double eps, Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t n = sum.size(-1), rows = sum.numel() / n;
  const std::vector<float> w = values_as<float>(weight), sh = values_as<float>(bias);
  visit_f32_or_narrow(a.dtype(), [&]<typename A>() {
    visit_f32_or_narrow(b.dtype(), [&]<typename B>() {
      if constexpr (std::is_same_v<A, float> || std::is_same_v<B, float>) {  // rows_apply
        visit_f32_or_narrow(y.dtype(), [&]<typename Y>() {
          forward_rows<A, B, Y>(a.data<A>(), b.data<B>(), rows, n, w, sh, float(eps),
                                sum.data<float>(), y.data<Y>(), mean.data<float>(),
                                rstd.data<float>());
        });
      }
    });
  });
}

void add_layer_norm_composed(const Tensor& a, const Tensor& b, const Tensor& weight,
                             const Tensor& bias, double eps, Tensor& sum, Tensor& y, Tensor& mean,
                             Tensor& rstd) {
  add_forward(a, b, sum);
  layer_norm(sum, weight, bias, eps, y, mean, rstd);
}

// ---- backward ----

bool backward_rows_apply(const Tensor& sum, const Tensor& g_y, const Tensor& g_sum, const Tensor&,
                         const Tensor&, const Tensor&, const Tensor& ds, const Tensor& ds_narrow,
                         const Tensor&, const Tensor&) {
  return sum.dtype() == DType::f32 && g_sum.dtype() == DType::f32 && ds.dtype() == DType::f32 &&
         (g_y.dtype() == DType::f32 || is_narrow(g_y.dtype())) &&
         (!ds_narrow.defined() || is_narrow(ds_narrow.dtype()));
}

// The pointers of one backward call.
struct BackwardRows {
  const float *sum, *g_sum, *mean, *rstd, *w;
  float* ds;
  int64_t rows, n;
};

// One row's input gradient of the layer norm, into dx, as layer_norm_backward's fast candidate
// computes it (a bf16 g widened in the row kernel's registers, an f16 one first).
template <typename G>
void norm_backward_row(const float* s, const G* g, const float* w, NormStats stats, int64_t n,
                       float* widened, const NormBackwardRow& out) {
  if constexpr (std::is_same_v<G, bfloat16>) {
    layer_norm_backward_row_bf16(s, reinterpret_cast<const uint16_t*>(g), w, stats, n, out);
  } else if constexpr (std::is_same_v<G, float>) {
    layer_norm_backward_row_f32(s, g, w, stats, n, out);
  } else {
    widen(g, n, widened);
    layer_norm_backward_row_f32(s, widened, w, stats, n, out);
  }
}

template <typename G, typename N>
void backward_rows(const BackwardRows& r, const G* g_y, N* ds_narrow, std::vector<float>& dweight,
                   std::vector<float>& dbias) {
  const int64_t n = r.n, grain = layer_norm_backward_grain(r.rows, n);
  const int64_t chunks = (r.rows + grain - 1) / grain;
  std::vector<float> part_w(size_t(chunks * n), 0.0f), part_b(size_t(chunks * n), 0.0f);
  parallel_for(r.rows, grain, [&](int64_t begin, int64_t end) {
    float* pw = part_w.data() + (begin / grain) * n;
    float* pb = part_b.data() + (begin / grain) * n;
    std::vector<float> xh(static_cast<size_t>(n)), gw(static_cast<size_t>(n)),
        widened(static_cast<size_t>(n));
    for (int64_t row = begin; row < end; ++row) {
      float* d = r.ds + row * n;
      const NormStats stats{.mean = r.mean[row], .rstd = r.rstd[row]};
      norm_backward_row(r.sum + row * n, g_y + row * n, r.w, stats, n, widened.data(),
                        {.xhat = xh.data(), .gw = gw.data(), .pw = pw, .pb = pb, .dx = d});
      const float* other = r.g_sum + row * n;
      for (int64_t j = 0; j < n; ++j) d[j] += other[j];
    }
    // The chunk's rows at once (in L1), one conversion call per chunk.
    if (ds_narrow != nullptr) {
      narrow(r.ds + begin * n, (end - begin) * n, ds_narrow + begin * n);
    }
  });
  add_chunk_partials(part_w, chunks, n, dweight);
  add_chunk_partials(part_b, chunks, n, dbias);
}

void add_layer_norm_backward_rows(const Tensor& sum, const Tensor& g_y, const Tensor& g_sum,
                                  const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                  Tensor& ds, Tensor& ds_narrow, Tensor& dweight, Tensor& dbias) {
  const int64_t n = sum.size(-1);
  const std::vector<float> w = values_as<float>(weight);
  const BackwardRows r{.sum = sum.data<float>(),
                       .g_sum = g_sum.data<float>(),
                       .mean = mean.data<float>(),
                       .rstd = rstd.data<float>(),
                       .w = w.empty() ? nullptr : w.data(),
                       .ds = ds.data<float>(),
                       .rows = sum.numel() / n,
                       .n = n};
  std::vector<float> sum_w(size_t(n), 0.0f), sum_b(size_t(n), 0.0f);
  visit_f32_or_narrow(g_y.dtype(), [&]<typename G>() {
    if (!ds_narrow.defined()) {
      backward_rows<G, float>(r, g_y.data<G>(), nullptr, sum_w, sum_b);
      return;
    }
    visit_f32_or_narrow(ds_narrow.dtype(), [&]<typename N>() {
      if constexpr (!std::is_same_v<N, float>) {
        backward_rows<G, N>(r, g_y.data<G>(), ds_narrow.data<N>(), sum_w, sum_b);
      }
    });
  });
  store_values(sum_w, dweight);
  store_values(sum_b, dbias);
}

void add_layer_norm_backward_composed(const Tensor& sum, const Tensor& g_y, const Tensor& g_sum,
                                      const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                      Tensor& ds, Tensor& ds_narrow, Tensor& dweight,
                                      Tensor& dbias) {
  Tensor dx = empty(sum.shape(), sum.dtype(), MemoryTag::workspace, sum.device());
  layer_norm_backward(sum, g_y, weight, mean, rstd, dx, dweight, dbias);
  add_forward(dx, g_sum, ds);
  if (!ds_narrow.defined()) return;
  visit_f32_or_narrow(ds_narrow.dtype(), [&]<typename N>() {
    if constexpr (!std::is_same_v<N, float>) {
      narrow(ds.data<float>(), ds.numel(), ds_narrow.data<N>());
    }
  });
}

}  // namespace

Kernel<AddLayerNormFn> add_layer_norm(
    "add_layer_norm", {{.name = "rows", .applies = rows_apply, .fn = add_layer_norm_rows},
                       {.name = "composed", .fn = add_layer_norm_composed, .fallback = true}});

Kernel<AddLayerNormBackwardFn> add_layer_norm_backward(
    "add_layer_norm_backward",
    {{.name = "rows", .applies = backward_rows_apply, .fn = add_layer_norm_backward_rows},
     {.name = "composed", .fn = add_layer_norm_backward_composed, .fallback = true}});

}  // namespace mixp::kernels
