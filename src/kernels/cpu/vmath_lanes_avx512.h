// The per-lane math of kernels/vmath.h on 16 fp32 lanes, shared by the AVX-512 F kernels
// (vmath_avx512.cpp) and the AVX-512 BF16 ones (vmath_avx512_bf16.cpp), so that both compute
// the same bits as the scalar kernels in ref/vmath_ref.cpp. The including file must be compiled
// with -ffp-contract=off: the operations are the scalar kernels' in their order.
//
// Internal linkage: each ISA file gets its own copy, compiled for its own ISA, and no copy can
// stand in for another file's.
#pragma once

#include <immintrin.h>

#include "kernels/cpu/bf16_round_avx512.h"
#include "kernels/vmath_isa.h"

namespace mixp::kernels::lanes {
namespace {

// e^x: n = round(x log2 e), r = x - n ln 2 in two parts, a degree-8 polynomial, times 2^n.
inline __m512 exp16(__m512 x) {
  using namespace vmath;
  // min and max return their second operand when either is NaN: constant first keeps NaN.
  x = _mm512_max_ps(_mm512_set1_ps(kExpMin), _mm512_min_ps(_mm512_set1_ps(kExpMax), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (int k = 1; k < 6; ++k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[k]));
  const __m512 one = _mm512_set1_ps(1.0f);
  p = _mm512_fmadd_ps(p, r, one);
  p = _mm512_fmadd_ps(p, r, one);
  return _mm512_scalef_ps(p, n);
}

// 1 / (1 + e) with e = e^(-2u), u = sqrt(2 / pi) (x + a x^3): gelu_tanh(x) = x times it. Also
// gives x^2 and e, which the backward reuses.
inline __m512 gelu_sigmoid16(__m512 x, __m512& x2, __m512& e) {
  using namespace vmath;
  x2 = _mm512_mul_ps(x, x);
  const __m512 u = _mm512_mul_ps(_mm512_set1_ps(kGeluK),
                                 _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(kGeluA), x2), x, x));
  e = exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u));
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, e));
}

inline __m512 gelu16(__m512 x) {
  __m512 x2, e;
  return _mm512_mul_ps(x, gelu_sigmoid16(x, x2, e));
}

// The backward's per-lane operations: g gelu_tanh'(v).
inline __m512 gelu_grad16(__m512 g, __m512 v) {
  using namespace vmath;
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512 x2, e;
  const __m512 s = gelu_sigmoid16(v, x2, e);
  const __m512 du =
      _mm512_mul_ps(_mm512_set1_ps(kGeluK), _mm512_fmadd_ps(_mm512_set1_ps(kGeluA3), x2, one));
  const __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(2.0f), v),
                                 _mm512_min_ps(_mm512_mul_ps(e, s), one));  // inf * 0 -> 1
  const __m512 d = _mm512_mul_ps(s, _mm512_fmadd_ps(t, du, one));
  return _mm512_mul_ps(g, d);
}

// Lane l plus lane l + 8, then l + 4, l + 2, l + 1 (ref's fold_lanes): the end of sum_f32 and
// dot_f32.
inline float fold_sum(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  const __m128 s4 = _mm_add_ps(_mm256_extractf128_ps(s8, 0), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// The largest lane as max_f32 folds it, `hi > lo ? hi : lo` each time: vmaxps returns its second
// operand on ties and NaN.
inline float fold_max(__m512 v) {
  const __m256 s8 = _mm256_max_ps(_mm512_extractf32x8_ps(v, 1), _mm512_extractf32x8_ps(v, 0));
  const __m128 s4 = _mm_max_ps(_mm256_extractf128_ps(s8, 1), _mm256_extractf128_ps(s8, 0));
  const __m128 s2 = _mm_max_ps(_mm_movehl_ps(s4, s4), s4);
  return _mm_cvtss_f32(_mm_max_ss(_mm_shuffle_ps(s2, s2, 1), s2));
}

// The first `rest` (0 < rest < 16) of 16 lanes.
inline __mmask16 tail_mask(int64_t rest) { return __mmask16((1u << rest) - 1); }

// The lanes of `m` of v rounded to bf16 with the AVX-512 F integer rounding, stored at p.
inline void store_bf16(uint16_t* p, __m512 v, __mmask16 m = 0xffff) {
  _mm256_mask_storeu_epi16(p, m,
                           _mm512_cvtepi32_epi16(avx512::round_to_bf16(_mm512_castps_si512(v))));
}

// The first lanes of `m` of 16 bf16 patterns from p, widened exactly to fp32; the others +0.
inline __m512 load_bf16(const uint16_t* p, __mmask16 m = 0xffff) {
  const __m256i bits = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

}  // namespace
}  // namespace mixp::kernels::lanes
