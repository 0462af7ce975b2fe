// kernels/plane_row_sums_isa.h on AVX-512 F: a row's sum is a chain of w dependent fp32
// additions that cannot be reordered without changing its bits, so the vector runs 16 rows'
// chains side by side, one lane a row. The rows are read 16 values at a time and each 16 x 16
// block is transposed in registers (64 shuffles), which gives, for column j, the vector of the
// 16 rows' values at j: one vector addition a column.
#include <immintrin.h>

#include <algorithm>

#include "kernels/plane_row_sums_isa.h"

// GCC 12 takes the _mm512_undefined pass-through operand inside the unpacks for an
// uninitialized read where they are inlined into the transpose; that operand is never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mixp::kernels::avx512 {
namespace {

__m512 pairs_lo(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}
__m512 pairs_hi(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}

// v[k] holds row k's 16 values; afterwards v[j] holds column j's 16 values, row k in lane k.
void transpose16(__m512 v[16]) {
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

void plane_row_sums_f32(const float* plane, int64_t h, int64_t w, float* rows) {
  for (int64_t r = 0; r < h; r += 16) {
    const int64_t count = std::min<int64_t>(16, h - r);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t c = 0; c < w; c += 16) {
      const int64_t width = std::min<int64_t>(16, w - c);
      const auto lanes = __mmask16((1u << width) - 1);
      __m512 v[16];
      for (int64_t k = 0; k < 16; ++k)
        v[k] =
            k < count ? _mm512_maskz_loadu_ps(lanes, plane + (r + k) * w + c) : _mm512_setzero_ps();
      transpose16(v);
      for (int64_t j = 0; j < width; ++j) acc = _mm512_add_ps(acc, v[j]);
    }
    _mm512_mask_storeu_ps(rows + r, __mmask16((1u << count) - 1), acc);
  }
}

}  // namespace mixp::kernels::avx512

#pragma GCC diagnostic pop
