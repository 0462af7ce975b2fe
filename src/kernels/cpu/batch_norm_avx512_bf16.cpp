// kernels/cpu/batch_norm_rows.h on AVX-512 BF16: values widened by a shift, computed with the
// fp32 loops' operations in their order (no FMA: compiled with -ffp-contract=off), the sums in
// sum_f32's and dot_f32's 16 lanes and fold (lanes::fold_sum), the results rounded 32 at a time
// by vcvtne2ps2bf16 with the subnormal fix-up of bf16_round_avx512_bf16.h.
#include "kernels/cpu/batch_norm_rows.h"

#include "kernels/cpu/bf16_round_avx512_bf16.h"
#include "kernels/cpu/vmath_lanes_avx512.h"

namespace mixp::kernels::avx512_bf16 {
namespace {

__m512 widen16(const uint16_t* p, __mmask16 m) {
  const __m256i bits = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// The lanes of a run of n: full vectors, then the tail under its mask (lanes outside it +0).
template <typename F>
void over_lanes(int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) f(i, __mmask16(0xffff));
  if (i < n) f(i, lanes::tail_mask(n - i));
}

// g' of the rows: g, or 0 where ReLU cut (relu_y's bits zero); +0 outside the mask.
__m512 masked_gradient(const uint16_t* g, const uint16_t* relu_y, int64_t i, __mmask16 mask) {
  __mmask16 pass = mask;
  if (relu_y != nullptr) {
    const __m256i yb = _mm256_maskz_loadu_epi16(mask, relu_y + i);
    pass = _mm256_mask_test_epi16_mask(mask, yb, yb);
  }
  return widen16(g + i, pass);
}

}  // namespace

float batch_norm_sum_bf16(const uint16_t* x, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  over_lanes(n, [&](int64_t i, __mmask16 m) { acc = _mm512_add_ps(acc, widen16(x + i, m)); });
  return lanes::fold_sum(acc);
}

float batch_norm_centered_squares_bf16(const uint16_t* x, int64_t n, float mean) {
  const __m512 mv = _mm512_set1_ps(mean);
  __m512 acc = _mm512_setzero_ps();
  over_lanes(n, [&](int64_t i, __mmask16 m) {
    const __m512 d = _mm512_maskz_sub_ps(m, widen16(x + i, m), mv);  // dot_f32's tail reads +0
    acc = _mm512_add_ps(acc, _mm512_mul_ps(d, d));
  });
  return lanes::fold_sum(acc);
}

void batch_norm_grad_sums_bf16(const uint16_t* x, const uint16_t* g, const uint16_t* relu_y,
                               int64_t n, float mean, float rstd, float& sum_g, float& sum_gx) {
  const __m512 mv = _mm512_set1_ps(mean), rs = _mm512_set1_ps(rstd);
  __m512 acc_g = _mm512_setzero_ps(), acc_gx = _mm512_setzero_ps();
  over_lanes(n, [&](int64_t i, __mmask16 m) {
    const __m512 gv = masked_gradient(g, relu_y, i, m);
    const __m512 xhat = _mm512_maskz_mul_ps(m, _mm512_sub_ps(widen16(x + i, m), mv), rs);
    acc_g = _mm512_add_ps(acc_g, gv);
    acc_gx = _mm512_add_ps(acc_gx, _mm512_mul_ps(gv, xhat));
  });
  sum_g = lanes::fold_sum(acc_g);
  sum_gx = lanes::fold_sum(acc_gx);
}

void batch_norm_rows_bf16(const uint16_t* x, uint16_t* y, int64_t n, float mean, float rstd,
                          float scale, float shift, bool relu) {
  const __m512 m = _mm512_set1_ps(mean), rs = _mm512_set1_ps(rstd);
  const __m512 sc = _mm512_set1_ps(scale), sh = _mm512_set1_ps(shift);
  const __m512 zero = _mm512_setzero_ps();
  rows_to_bf16(n, y, [&](int64_t i, __mmask16 mask) {
    const __m512 v = _mm512_add_ps(
        _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(widen16(x + i, mask), m), rs), sc), sh);
    // vmaxps returns its second operand where either is NaN or both are zeros.
    return relu ? _mm512_max_ps(v, zero) : v;
  });
}

void batch_norm_grad_rows_bf16(const uint16_t* x, const uint16_t* g, const uint16_t* relu_y,
                               uint16_t* dx, int64_t n, float mean, float rstd, float scale,
                               float mean_g, float mean_gx, bool training) {
  const __m512 m = _mm512_set1_ps(mean), rs = _mm512_set1_ps(rstd);
  const __m512 factor = _mm512_set1_ps(scale * rstd);
  const __m512 mg = _mm512_set1_ps(mean_g), mgx = _mm512_set1_ps(mean_gx);
  rows_to_bf16(n, dx, [&](int64_t i, __mmask16 mask) {
    const __m512 gv = masked_gradient(g, relu_y, i, mask);
    if (!training) return _mm512_mul_ps(factor, gv);
    const __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(widen16(x + i, mask), m), rs);
    return _mm512_mul_ps(factor, _mm512_sub_ps(_mm512_sub_ps(gv, mg), _mm512_mul_ps(xhat, mgx)));
  });
}

}  // namespace mixp::kernels::avx512_bf16
