// max_pool2d's forward on AVX-512 for windows two columns wide every two columns (2 x 2 pooling
// with stride 2, the CNNs' case; any rows), f32, bf16 and f16: 16 windows of an output row a
// step.
// The scalar kernel (pool.cpp) scans one window at a time, a serial chain of dependent
// compare-and-selects that was a third of a cnn amp-bf16 step. The rule is the scalar one, so
// the results are the same bits and indices: each window is read row by row, left column then
// right; an element replaces the held one when it is greater, or NaN while the held one is
// not, so the first maximum wins and the first NaN wins and stays.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/parallel.h"
#include "kernels/pool.h"

namespace mixp::kernels::avx512 {
namespace {

// f16's storage, told apart from bf16's uint16_t.
struct Half {
  uint16_t bits;
};

struct Pairs {
  __m512 left, right;  // columns 2j and 2j + 1 of 16 windows, widened to fp32
  // f16 only: the inputs' own bits in the low halves of the lanes, so that the stored maxima
  // are copies of the inputs (a NaN's payload included) rather than narrowed fp32 values.
  __m512i left_bits = _mm512_setzero_si512(), right_bits = _mm512_setzero_si512();
};

// 32 consecutive inputs (fewer under the mask) split into the windows' two columns.
static Pairs load_pairs(const float* at, __mmask16 lo, __mmask16 hi) {
  const __m512 a = _mm512_maskz_loadu_ps(lo, at), b = _mm512_maskz_loadu_ps(hi, at + 16);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  return {.left = _mm512_permutex2var_ps(a, even, b), .right = _mm512_permutex2var_ps(a, odd, b)};
}

// bf16 pairs are the two halves of a 32-bit lane: the left one the low half.
static Pairs load_pairs(const uint16_t* at, __mmask16 lo, __mmask16 hi) {
  const __mmask32 mask = __mmask32(lo) | (__mmask32(hi) << 16);
  const __m512i v = _mm512_maskz_loadu_epi16(mask, at);
  return {
      .left = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)),
      .right = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int32_t(0xffff0000u))))};
}

// f16 pairs, as bf16's, are the two halves of a 32-bit lane; vcvtph2ps widens them exactly.
static Pairs load_pairs(const Half* at, __mmask16 lo, __mmask16 hi) {
  const __mmask32 mask = __mmask32(lo) | (__mmask32(hi) << 16);
  const __m512i v = _mm512_maskz_loadu_epi16(mask, at);
  const __m512i left_bits = _mm512_and_si512(v, _mm512_set1_epi32(0xffff));
  const __m512i right_bits = _mm512_srli_epi32(v, 16);
  return {.left = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(left_bits)),
          .right = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(right_bits)),
          .left_bits = left_bits,
          .right_bits = right_bits};
}

struct Held {
  __m512 value;
  __m512i index;
  __m512i bits;  // f16: the held inputs' bits (unused, and optimized away, for f32 and bf16)
  void offer(__m512 v, __m512i v_bits, __m512i at) {
    const __mmask16 ordered = _mm512_cmp_ps_mask(value, value, _CMP_ORD_Q);
    const __mmask16 take = ordered & (_mm512_cmp_ps_mask(v, value, _CMP_GT_OQ) |
                                      _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
    value = _mm512_mask_blend_ps(take, value, v);
    bits = _mm512_mask_blend_epi32(take, bits, v_bits);
    index = _mm512_mask_blend_epi32(take, index, at);
  }
};

static void store_values(float* out, __mmask16 m, const Held& h) {
  _mm512_mask_storeu_ps(out, m, h.value);
}

// The held values are widened bf16 values, so their high halves are the inputs' bits.
static void store_values(uint16_t* out, __mmask16 m, const Held& h) {
  _mm512_mask_cvtepi32_storeu_epi16(out, m, _mm512_srli_epi32(_mm512_castps_si512(h.value), 16));
}

static void store_values(Half* out, __mmask16 m, const Held& h) {
  _mm512_mask_cvtepi32_storeu_epi16(out, m, h.bits);
}

template <typename T>
void max_pairs(const Pool2dShape& p, const T* x, T* y, int64_t* index) {
  // Plain loops and expressions only: an inline function compiled here for AVX-512 could be
  // the copy the linker keeps for every other file.
  const int64_t oh = int64_t(p.rows.start.size()), ow = int64_t(p.cols.start.size());
  const int64_t plane_size = p.h * p.w > 0 ? p.h * p.w : 1;
  const int64_t grain = 16384 / plane_size > 0 ? 16384 / plane_size : 1;
  const int64_t* row_starts = p.rows.start.data();
  const int64_t* row_ends = p.rows.end.data();
  const __m512i lane_column =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  parallel_for(p.planes, grain, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* in = x + plane * p.h * p.w;
      for (int64_t i = 0; i < oh; ++i) {
        const int64_t row_start = row_starts[i], row_end = row_ends[i];
        for (int64_t j = 0; j < ow; j += 16) {
          const int64_t n = ow - j < 16 ? ow - j : 16;
          const __mmask16 m = __mmask16((1u << n) - 1);
          const __mmask16 lo = n >= 8 ? __mmask16(0xffff) : __mmask16((1u << (2 * n)) - 1);
          const __mmask16 hi = n > 8 ? __mmask16((1u << (2 * (n - 8))) - 1) : __mmask16(0);
          // Start from each window's first element; offering it again changes nothing.
          const Pairs first = load_pairs(in + row_start * p.w + 2 * j, lo, hi);
          Held held{.value = first.left,
                    .index = _mm512_add_epi32(lane_column,
                                              _mm512_set1_epi32(int32_t(row_start * p.w + 2 * j))),
                    .bits = first.left_bits};
          for (int64_t h = row_start; h < row_end; ++h) {
            const Pairs v = load_pairs(in + h * p.w + 2 * j, lo, hi);
            const __m512i at =
                _mm512_add_epi32(lane_column, _mm512_set1_epi32(int32_t(h * p.w + 2 * j)));
            held.offer(v.left, v.left_bits, at);
            held.offer(v.right, v.right_bits, _mm512_add_epi32(at, _mm512_set1_epi32(1)));
          }
          const int64_t o = plane * oh * ow + i * ow + j;
          store_values(y + o, m, held);
          _mm512_mask_storeu_epi64(index + o, __mmask8(m),
                                   _mm512_cvtepi32_epi64(_mm512_castsi512_si256(held.index)));
          _mm512_mask_storeu_epi64(index + o + 8, __mmask8(m >> 8),
                                   _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(held.index, 1)));
        }
      }
    }
  });
}

}  // namespace

bool max_pool2d_pairs_apply(const Pool2dShape& p, DType dt) {
  if (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16) return false;
  if (p.h * p.w > int64_t(INT32_MAX)) return false;  // the indices are 32-bit
  const int64_t* starts = p.cols.start.data();
  const int64_t* ends = p.cols.end.data();
  for (int64_t j = 0; j < int64_t(p.cols.start.size()); ++j) {
    if (starts[j] != 2 * j || ends[j] != 2 * j + 2) return false;
  }
  return true;
}

void max_pool2d_pairs(const Pool2dShape& p, DType dt, const void* x, void* y, int64_t* index) {
  if (dt == DType::f32) {
    max_pairs(p, static_cast<const float*>(x), static_cast<float*>(y), index);
  } else if (dt == DType::f16) {
    max_pairs(p, static_cast<const Half*>(x), static_cast<Half*>(y), index);
  } else {
    max_pairs(p, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), index);
  }
}

}  // namespace mixp::kernels::avx512
