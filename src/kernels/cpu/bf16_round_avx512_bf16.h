// fp32 -> bf16 rounding of 32 lanes with vcvtne2ps2bf16, for the AVX-512 BF16 files only. The
// instruction rounds to nearest even and quiets NaNs exactly as mixp does, but it treats fp32
// subnormal inputs as zero (DAZ), so the lanes with a zero exponent field and a nonzero
// mantissa are redone with the integer rounding.
//
// Included by files compiled with -mavx512bf16 alone; the functions have internal linkage, so
// no AVX-512 copy of them can stand in for another file's.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

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

// The masks of the first `rest` (< 32, > 0) of 32 lanes, as two halves and as one.
struct TailMasks {
  __mmask16 lo, hi;
  __mmask32 all;
};
inline TailMasks tail_masks(size_t rest) {
  const __mmask16 lo = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1);
  const __mmask16 hi = rest > 16 ? __mmask16((1u << (rest - 16)) - 1) : __mmask16(0);
  return {.lo = lo, .hi = hi, .all = __mmask32(lo) | (__mmask32(hi) << 16)};
}

// out[0, n) as bf16, 32 lanes at a time with only the tail masked; f(i, mask) gives the 16 fp32
// lanes from element i (the lanes outside `mask` are not stored).
template <typename F>
void rows_to_bf16(int64_t n, uint16_t* out, F f) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm512_storeu_si512(out + i, convert32(f(i, __mmask16(0xffff)), f(i + 16, __mmask16(0xffff))));
  }
  if (i < n) {
    const TailMasks m = tail_masks(size_t(n - i));
    _mm512_mask_storeu_epi16(out + i, m.all, convert32(f(i, m.lo), f(i + 16, m.hi)));
  }
}

}  // namespace
}  // namespace mixp::kernels::avx512_bf16
