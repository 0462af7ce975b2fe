// kernels/cpu/batch_norm_rows.h on AVX-512 BF16: 32 values a step, widened by a shift, computed
// with the fp32 loops' operations in their order (no FMA: compiled with -ffp-contract=off) and
// rounded by vcvtne2ps2bf16 with the subnormal fix-up of bf16_round_avx512_bf16.h.
#include "kernels/cpu/batch_norm_rows.h"

#include "kernels/cpu/bf16_round_avx512_bf16.h"

namespace mixp::kernels::avx512_bf16 {
namespace {

__m512 widen16(const uint16_t* p, __mmask16 m) {
  const __m256i bits = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

}  // namespace

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
    __mmask16 pass = mask;
    if (relu_y != nullptr) {
      const __m256i yb = _mm256_maskz_loadu_epi16(mask, relu_y + i);
      pass = _mm256_mask_test_epi16_mask(mask, yb, yb);
    }
    const __m512 gv = widen16(g + i, pass);  // 0 where ReLU cut
    if (!training) return _mm512_mul_ps(factor, gv);
    const __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(widen16(x + i, mask), m), rs);
    return _mm512_mul_ps(factor, _mm512_sub_ps(_mm512_sub_ps(gv, mg), _mm512_mul_ps(xhat, mgx)));
  });
}

}  // namespace mixp::kernels::avx512_bf16
