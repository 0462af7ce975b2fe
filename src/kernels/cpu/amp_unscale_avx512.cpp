// kernels/amp_unscale_isa.h on AVX-512 F: each vector of 16 gradients is checked and scaled in
// registers, so a gradient is read and written once. The tail is masked, not scalar.
#include <immintrin.h>

#include <bit>

#include "kernels/amp_unscale_isa.h"

namespace mixp::kernels::avx512 {

int64_t unscale_f32(float* x, int64_t n, float inv, bool multiply) {
  const __m512 scale = _mm512_set1_ps(inv);
  // |v| <= FLT_MAX is false exactly for inf and NaN (an unordered compare is false).
  const __m512 largest = _mm512_set1_ps(0x1.fffffep127f);
  int64_t first = -1;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(lanes, x + i);
    const __mmask16 finite = _mm512_mask_cmp_ps_mask(lanes, _mm512_abs_ps(v), largest, _CMP_LE_OQ);
    if (first < 0 && finite != lanes)
      first = i + std::countr_zero(uint32_t(uint16_t(lanes & ~finite)));
    if (multiply) _mm512_mask_storeu_ps(x + i, lanes, _mm512_mul_ps(v, scale));
  }
  return first;
}

}  // namespace mixp::kernels::avx512
