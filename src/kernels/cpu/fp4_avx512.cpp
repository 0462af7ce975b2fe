// E2M1 rounding of kernels/fp4.h on AVX-512 F: 16 elements a step, the same comparisons as the
// scalar e2m1_round_nearest and e2m1_round_stochastic (kernels/fp4_scales.cpp), then two codes
// packed into each byte.
#include <immintrin.h>

#include "kernels/fp4.h"

namespace mixp::kernels::avx512 {
namespace {

// |y| and the sign bit moved to bit 3 of each lane.
inline void split_sign(__m512 y, __m512& a, __m512i& sign) {
  const __m512i bits = _mm512_castps_si512(y);
  a = _mm512_castsi512_ps(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)));
  sign = _mm512_slli_epi32(_mm512_srli_epi32(bits, 31), 3);
}

inline __m512i count_if(__m512i acc, __mmask16 m) {
  return _mm512_mask_add_epi32(acc, m, acc, _mm512_set1_epi32(1));
}

// 16 codes (one a 32-bit lane) into 8 bytes: lane 2j in the low nibble, 2j + 1 in the high.
inline void store_packed(__m512i codes, uint8_t* out) {
  const __m512i pairs = _mm512_or_si512(codes, _mm512_srli_epi64(codes, 28));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm512_cvtepi64_epi8(pairs));
}

inline __m512i nearest_codes(__m512 a) {
  __m512i c = _mm512_setzero_si512();
  c = count_if(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.25f), _CMP_GT_OQ));
  c = count_if(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.75f), _CMP_GE_OQ));
  c = count_if(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(1.25f), _CMP_GT_OQ));
  c = count_if(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(1.75f), _CMP_GE_OQ));
  c = count_if(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(2.5f), _CMP_GT_OQ));
  c = count_if(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(3.5f), _CMP_GE_OQ));
  c = count_if(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(5.0f), _CMP_GT_OQ));
  return c;
}

}  // namespace

void e2m1_encode_nearest(const float* y, int64_t n, float scale, uint8_t* packed) {
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    __m512 a;
    __m512i sign;
    split_sign(_mm512_mul_ps(_mm512_loadu_ps(y + i), s), a, sign);
    store_packed(_mm512_or_si512(nearest_codes(a), sign), packed + i / 2);
  }
}

void e2m1_encode_stochastic(const float* y, const uint32_t* random, int64_t n, float scale,
                            uint8_t* packed) {
  const __m512 s = _mm512_set1_ps(scale);
  // Indexed by the code below: its value, and the gap to the next value.
  const __m512 value =
      _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512 gap =
      _mm512_setr_ps(0.5f, 0.5f, 0.5f, 0.5f, 1.0f, 1.0f, 2.0f, 2.0f, 1, 1, 1, 1, 1, 1, 1, 1);
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    __m512 a;
    __m512i sign;
    split_sign(_mm512_mul_ps(_mm512_loadu_ps(y + i), s), a, sign);
    __m512i lo = _mm512_setzero_si512();
    for (float g : {0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f})
      lo = count_if(lo, _mm512_cmp_ps_mask(a, _mm512_set1_ps(g), _CMP_GE_OQ));
    const __m512 fraction = _mm512_div_ps(_mm512_sub_ps(a, _mm512_permutexvar_ps(lo, value)),
                                          _mm512_permutexvar_ps(lo, gap));
    const __m512i threshold =
        _mm512_cvttps_epu32(_mm512_mul_ps(fraction, _mm512_set1_ps(4294967296.0f)));
    const __m512i r = _mm512_loadu_si512(random + i);
    __m512i c = count_if(lo, _mm512_cmplt_epu32_mask(r, threshold));
    // 6 and beyond (and NaN, which the quantizers never pass) saturate to code 7.
    const __mmask16 big = _mm512_cmp_ps_mask(a, _mm512_set1_ps(kE2m1Max), _CMP_NLT_UQ);
    c = _mm512_mask_mov_epi32(c, big, _mm512_set1_epi32(7));
    store_packed(_mm512_or_si512(c, sign), packed + i / 2);
  }
}

}  // namespace mixp::kernels::avx512
