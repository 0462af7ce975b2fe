// fp32 -> bf16 with the AVX-512 BF16 instruction vcvtne2ps2bf16, 32 elements a step. It rounds
// to nearest even and quiets NaNs exactly as mixp does, but it treats fp32 subnormal inputs as
// zero (DAZ), so the lanes with a zero exponent field and a nonzero mantissa are redone with
// the integer rounding. Full blocks use plain loads and stores; only the tail is masked.
#include "kernels/convert_kernels.h"
#include "kernels/cpu/bf16_round_avx512_bf16.h"

namespace mixp::kernels::avx512_bf16 {

void f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i r = convert32(_mm512_loadu_ps(src + i), _mm512_loadu_ps(src + i + 16));
    _mm512_storeu_si512(dst + i, r);
  }
  if (i < n) {
    const TailMasks m = tail_masks(n - i);
    const __m512i r =
        convert32(_mm512_maskz_loadu_ps(m.lo, src + i), _mm512_maskz_loadu_ps(m.hi, src + i + 16));
    _mm512_mask_storeu_epi16(dst + i, m.all, r);
  }
}

}  // namespace mixp::kernels::avx512_bf16
