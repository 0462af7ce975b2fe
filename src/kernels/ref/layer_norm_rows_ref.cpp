// The scalar versions of kernels/layer_norm_rows.h: the bits every ISA's kernel gives.
#include <cmath>

#include "kernels/layer_norm_rows_isa.h"
#include "kernels/vmath_isa.h"
#include "mixp/float_types.h"

namespace mixp::kernels::ref {
namespace {

template <typename Store>
NormStats forward_row(const float* x, int64_t n, const float* w, const float* b, float eps,
                      float* v, Store store) {
  const float mean = sum_f32(x, n) / float(n);
  for (int64_t j = 0; j < n; ++j) v[j] = x[j] - mean;
  const float rstd = 1.0f / std::sqrt(dot_f32(v, v, n) / float(n) + eps);
  for (int64_t j = 0; j < n; ++j) {
    float o = v[j] * rstd;
    if (w != nullptr) o *= w[j];
    if (b != nullptr) o += b[j];
    store(j, o);
  }
  return {.mean = mean, .rstd = rstd};
}

template <typename Grad>
void backward_row(const float* x, Grad g, const float* w, NormStats s, int64_t n,
                  const NormBackwardRow& out) {
  for (int64_t j = 0; j < n; ++j) {
    const float gj = g(j);
    out.xhat[j] = (x[j] - s.mean) * s.rstd;
    out.pw[j] += gj * out.xhat[j];
    out.pb[j] += gj;
    out.gw[j] = w != nullptr ? gj * w[j] : gj;
  }
  if (out.dx == nullptr) return;
  const float mean_gw = sum_f32(out.gw, n) / float(n);
  const float mean_gwx = dot_f32(out.gw, out.xhat, n) / float(n);
  for (int64_t j = 0; j < n; ++j) {
    out.dx[j] = s.rstd * (out.gw[j] - mean_gw - out.xhat[j] * mean_gwx);
  }
}

}  // namespace

NormStats layer_norm_row_f32(const float* x, int64_t n, const float* w, const float* b, float eps,
                             float* v, float* y) {
  return forward_row(x, n, w, b, eps, v, [&](int64_t j, float o) { y[j] = o; });
}

NormStats layer_norm_row_bf16(const float* x, int64_t n, const float* w, const float* b, float eps,
                              float* v, uint16_t* y) {
  return forward_row(x, n, w, b, eps, v, [&](int64_t j, float o) { y[j] = bfloat16(o).bits; });
}

void layer_norm_backward_row_f32(const float* x, const float* g, const float* w, NormStats s,
                                 int64_t n, const NormBackwardRow& out) {
  backward_row(
      x, [&](int64_t j) { return g[j]; }, w, s, n, out);
}

void layer_norm_backward_row_bf16(const float* x, const uint16_t* g, const float* w, NormStats s,
                                  int64_t n, const NormBackwardRow& out) {
  backward_row(
      x, [&](int64_t j) { return float(bfloat16::from_bits(g[j])); }, w, s, n, out);
}

}  // namespace mixp::kernels::ref
