// fp32 -> bf16 with the AVX-512 BF16 instruction vcvtneps2bf16. It rounds to nearest even and
// quiets NaNs exactly as mixp does, but it treats fp32 subnormal inputs as zero (DAZ), so the
// lanes with a zero exponent field and a nonzero mantissa are redone with the integer rounding.
#include <immintrin.h>

#include "kernels/convert_kernels.h"

namespace mixp::kernels::avx512_bf16 {

void f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  const __m512i exp_mask = _mm512_set1_epi32(0x7f800000);
  const __m512i man_mask = _mm512_set1_epi32(0x007fffff);
  for (size_t i = 0; i < n; i += 16) {
    const size_t remaining = n - i;
    const __mmask16 m = remaining >= 16 ? __mmask16(0xffff) : __mmask16((1u << remaining) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, src + i);
    __m256i r = (__m256i)_mm512_cvtneps_pbh(v);
    const __m512i x = _mm512_castps_si512(v);
    const __mmask16 subnormal = _mm512_mask_test_epi32_mask(
        _mm512_testn_epi32_mask(x, exp_mask), x, man_mask);
    if (subnormal) [[unlikely]] {
      // For exponent field 0 the rounding carry cannot reach the NaN range, so the plain
      // integer rounding applies: (x + 0x7fff + lsb) >> 16.
      const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
      const __m512i fixed = _mm512_srli_epi32(
          _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
      r = _mm256_mask_blend_epi16(subnormal, r, _mm512_cvtepi32_epi16(fixed));
    }
    _mm256_mask_storeu_epi16(dst + i, m, r);
  }
}

}  // namespace mixp::kernels::avx512_bf16
