// A 16 x 16 transpose of 32-bit lanes (fp32 values, or any bits: the shuffles only move them) in
// zmm registers, for the AVX-512 files that include it: the conv bias gradient's row sums, the
// f16 tiles' packings and the bf16 pair tiles' packings by pairs of words.
// Internal linkage: each including file compiles its own copy for its own ISA.
#pragma once

#include <immintrin.h>

// GCC 12 takes the _mm512_undefined pass-through operand inside the unpacks for an
// uninitialized read where they are inlined into the transpose; that operand is never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mixp::kernels::avx512 {
namespace {

inline __m512 pairs_lo(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}
inline __m512 pairs_hi(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}

// v[k] holds row k's 16 values; afterwards v[j] holds column j's 16 values, row k in lane k.
inline void transpose16(__m512 v[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  // s[4 i + j], in 128-bit lane L: column 4 L + j of rows 4 i to 4 i + 3.
  __m512 s[16];
  for (int i = 0; i < 4; ++i) {
    s[4 * i] = pairs_lo(t[4 * i], t[4 * i + 2]);
    s[4 * i + 1] = pairs_hi(t[4 * i], t[4 * i + 2]);
    s[4 * i + 2] = pairs_lo(t[4 * i + 1], t[4 * i + 3]);
    s[4 * i + 3] = pairs_hi(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 a0 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0x44);
    const __m512 a1 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0xEE);
    const __m512 b0 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0x44);
    const __m512 b1 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0xEE);
    v[j] = _mm512_shuffle_f32x4(a0, b0, 0x88);
    v[4 + j] = _mm512_shuffle_f32x4(a0, b0, 0xDD);
    v[8 + j] = _mm512_shuffle_f32x4(a1, b1, 0x88);
    v[12 + j] = _mm512_shuffle_f32x4(a1, b1, 0xDD);
  }
}

}  // namespace
}  // namespace mixp::kernels::avx512

#pragma GCC diagnostic pop
