// fp32 -> bf16 with the AVX-512 BF16 instruction vcvtne2ps2bf16, 32 elements a step. It rounds
// to nearest even and quiets NaNs exactly as mixp does, but it treats fp32 subnormal inputs as
// zero (DAZ), so the lanes with a zero exponent field and a nonzero mantissa are redone with
// the integer rounding. Full blocks use plain loads and stores; only the tail is masked.
#include <immintrin.h>

#include "kernels/convert_kernels.h"

namespace mixp::kernels::avx512_bf16 {
namespace {

// Lanes of x that hold an fp32 subnormal.
inline __mmask16 subnormal_lanes(__m512i x) {
  return _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(x, _mm512_set1_epi32(0x7f800000)), x,
                                     _mm512_set1_epi32(0x007fffff));
}

// Integer rounding of 16 lanes: for exponent field 0 the carry cannot reach the NaN range, so
// (x + 0x7fff + lsb) >> 16 is the whole rule.
inline __m256i round_subnormals(__m512i x) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  return _mm512_cvtepi32_epi16(
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16));
}

// 32 values (lo then hi) to 32 bf16 patterns, with the subnormal fix-up.
inline __m512i convert32(__m512 lo, __m512 hi) {
  __m512i r = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
  const __m512i xlo = _mm512_castps_si512(lo), xhi = _mm512_castps_si512(hi);
  const __mmask32 fix = __mmask32(subnormal_lanes(xlo)) | (__mmask32(subnormal_lanes(xhi)) << 16);
  if (fix) [[unlikely]] {
    const __m512i fixed =
        _mm512_inserti64x4(_mm512_castsi256_si512(round_subnormals(xlo)), round_subnormals(xhi), 1);
    r = _mm512_mask_blend_epi16(fix, r, fixed);
  }
  return r;
}

}  // namespace

void f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i r = convert32(_mm512_loadu_ps(src + i), _mm512_loadu_ps(src + i + 16));
    _mm512_storeu_si512(dst + i, r);
  }
  if (i < n) {
    const size_t rest = n - i;
    const __mmask16 m_lo = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1);
    const __mmask16 m_hi = rest > 16 ? __mmask16((1u << (rest - 16)) - 1) : __mmask16(0);
    const __m512i r =
        convert32(_mm512_maskz_loadu_ps(m_lo, src + i), _mm512_maskz_loadu_ps(m_hi, src + i + 16));
    _mm512_mask_storeu_epi16(dst + i, __mmask32(m_lo) | (__mmask32(m_hi) << 16), r);
  }
}

}  // namespace mixp::kernels::avx512_bf16
