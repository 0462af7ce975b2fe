// fp32 -> bf16 rounding of 16 lanes in AVX-512 F integer arithmetic, for the AVX-512 F files
// only (convert_avx512.cpp, vmath_avx512.cpp): to nearest even, subnormals kept, NaN quieted
// with its sign and top payload bits, as round_f32_bits_to_bf16 in core does. Internal
// linkage, so that no AVX-512 copy of it can stand in for another file's.
#pragma once

#include <immintrin.h>

namespace mixp::kernels::avx512 {
namespace {

// 16 fp32 patterns to bf16 patterns, one per 32-bit lane.
inline __m512i round_to_bf16(__m512i x) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(r, is_nan, _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
}

}  // namespace
}  // namespace mixp::kernels::avx512
