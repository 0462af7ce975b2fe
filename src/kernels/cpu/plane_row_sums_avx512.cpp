// kernels/plane_row_sums_isa.h on AVX-512 F: a row's sum is a chain of w dependent fp32
// additions that cannot be reordered without changing its bits, so the vector runs 16 rows'
// chains side by side, one lane a row. The rows are read 16 values at a time and each 16 x 16
// block is transposed in registers (64 shuffles), which gives, for column j, the vector of the
// 16 rows' values at j: one vector addition a column.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/transpose16_avx512.h"
#include "kernels/plane_row_sums_isa.h"

// GCC 12 takes the _mm512_undefined pass-through operand inside the unpacks for an
// uninitialized read where they are inlined into the transpose; that operand is never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mixp::kernels::avx512 {

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
