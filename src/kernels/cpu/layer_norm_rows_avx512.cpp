// kernels/layer_norm_rows.h on AVX-512 F, 16 lanes a step with the tail masked: the scalar
// kernels' operations in their order, and the row sums in sum_f32's lanes, so the same bits.
// Generic loops over the rows compile to SSE2 and took about 3% of a gpt step. The backward
// sums gw and gw xhat in the pass that makes them.
#include <cmath>

#include "kernels/cpu/vmath_lanes_avx512.h"
#include "kernels/layer_norm_rows_isa.h"

namespace mixp::kernels::avx512 {
namespace {

using lanes::fold_sum;

// Calls f(i, mask) for each step of 16 lanes over [0, n), the last one masked.
template <typename F>
void for_lanes(int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) f(i, __mmask16(0xffff));
  if (i < n) f(i, lanes::tail_mask(n - i));
}

// The lanes outside a tail's mask are +0 in every sum: x + +0 = x for every x but -0, and a
// lane, starting at +0, is never -0 under round-to-nearest (as in sum_f32).
template <typename Store>
NormStats forward_row(const float* x, int64_t n, const float* w, const float* b, float eps,
                      float* v, Store store) {
  __m512 acc = _mm512_setzero_ps();
  for_lanes(n, [&](int64_t i, __mmask16 m) {
    acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, x + i));
  });
  const float mean = fold_sum(acc) / float(n);
  const __m512 mv = _mm512_set1_ps(mean);
  acc = _mm512_setzero_ps();
  for_lanes(n, [&](int64_t i, __mmask16 m) {
    const __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, x + i), mv);
    _mm512_mask_storeu_ps(v + i, m, d);
    acc = _mm512_add_ps(acc, _mm512_mul_ps(d, d));
  });
  const float rstd = 1.0f / std::sqrt(fold_sum(acc) / float(n) + eps);
  const __m512 rv = _mm512_set1_ps(rstd);
  for_lanes(n, [&](int64_t i, __mmask16 m) {
    __m512 o = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, v + i), rv);
    if (w != nullptr) o = _mm512_mul_ps(o, _mm512_maskz_loadu_ps(m, w + i));
    if (b != nullptr) o = _mm512_add_ps(o, _mm512_maskz_loadu_ps(m, b + i));
    store(i, m, o);
  });
  return {.mean = mean, .rstd = rstd};
}

template <typename LoadGrad>
void backward_row(const float* x, LoadGrad load_g, const float* w, NormStats s, int64_t n,
                  const NormBackwardRow& out) {
  const __m512 mv = _mm512_set1_ps(s.mean), rv = _mm512_set1_ps(s.rstd);
  __m512 sum_gw = _mm512_setzero_ps(), sum_gwx = _mm512_setzero_ps();
  for_lanes(n, [&](int64_t i, __mmask16 m) {
    const __m512 g = load_g(i, m);
    const __m512 xh =
        _mm512_maskz_mul_ps(m, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mv), rv);
    _mm512_mask_storeu_ps(out.xhat + i, m, xh);
    _mm512_mask_storeu_ps(
        out.pw + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, out.pw + i), _mm512_mul_ps(g, xh)));
    _mm512_mask_storeu_ps(out.pb + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, out.pb + i), g));
    const __m512 gw = w != nullptr ? _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, w + i)) : g;
    _mm512_mask_storeu_ps(out.gw + i, m, gw);
    sum_gw = _mm512_add_ps(sum_gw, gw);
    sum_gwx = _mm512_add_ps(sum_gwx, _mm512_mul_ps(gw, xh));
  });
  if (out.dx == nullptr) return;
  const __m512 mean_gw = _mm512_set1_ps(fold_sum(sum_gw) / float(n));
  const __m512 mean_gwx = _mm512_set1_ps(fold_sum(sum_gwx) / float(n));
  for_lanes(n, [&](int64_t i, __mmask16 m) {
    const __m512 t = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, out.gw + i), mean_gw);
    const __m512 u = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, out.xhat + i), mean_gwx);
    _mm512_mask_storeu_ps(out.dx + i, m, _mm512_mul_ps(rv, _mm512_sub_ps(t, u)));
  });
}

}  // namespace

NormStats layer_norm_row_f32(const float* x, int64_t n, const float* w, const float* b, float eps,
                             float* v, float* y) {
  return forward_row(x, n, w, b, eps, v,
                     [&](int64_t i, __mmask16 m, __m512 o) { _mm512_mask_storeu_ps(y + i, m, o); });
}

NormStats layer_norm_row_bf16(const float* x, int64_t n, const float* w, const float* b, float eps,
                              float* v, uint16_t* y) {
  return forward_row(x, n, w, b, eps, v,
                     [&](int64_t i, __mmask16 m, __m512 o) { lanes::store_bf16(y + i, o, m); });
}

void layer_norm_backward_row_f32(const float* x, const float* g, const float* w, NormStats s,
                                 int64_t n, const NormBackwardRow& out) {
  backward_row(
      x, [&](int64_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, g + i); }, w, s, n, out);
}

void layer_norm_backward_row_bf16(const float* x, const uint16_t* g, const float* w, NormStats s,
                                  int64_t n, const NormBackwardRow& out) {
  backward_row(
      x, [&](int64_t i, __mmask16 m) { return lanes::load_bf16(g + i, m); }, w, s, n, out);
}

}  // namespace mixp::kernels::avx512
