// kernels/cpu/batch_norm_rows.h on AVX-512 BF16: bf16 widened by a shift and f16 by vcvtph2ps,
// computed with the fp32 loops' operations in their order (no FMA: compiled with
// -ffp-contract=off), the sums in sum_f32's and dot_f32's 16 lanes and fold (lanes::fold_sum),
// the results rounded by vcvtne2ps2bf16 with the subnormal fix-up of bf16_round_avx512_bf16.h,
// or by vcvtps2ph to nearest even.
#include "kernels/cpu/batch_norm_rows.h"

#include "kernels/cpu/bf16_round_avx512_bf16.h"
#include "kernels/cpu/vmath_lanes_avx512.h"

namespace mixp::kernels::avx512_bf16 {
namespace {

// The lanes of a run of n: full vectors, then the tail under its mask (lanes outside it +0).
template <typename F>
void over_lanes(int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) f(i, __mmask16(0xffff));
  if (i < n) f(i, lanes::tail_mask(n - i));
}

struct Bf16 {
  static __m512 load(const uint16_t* p, __mmask16 m) {
    const __m256i bits = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
  template <typename F>
  static void store_rows(int64_t n, uint16_t* out, F f) {
    rows_to_bf16(n, out, f);
  }
};

struct F16 {
  static __m512 load(const uint16_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
  template <typename F>
  static void store_rows(int64_t n, uint16_t* out, F f) {
    over_lanes(n, [&](int64_t i, __mmask16 m) {
      _mm256_mask_storeu_epi16(
          out + i, m, _mm512_cvtps_ph(f(i, m), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    });
  }
};

// g' of the rows: g, or 0 where ReLU cut (relu_y's bits zero); +0 outside the mask.
template <typename Fmt>
__m512 masked_gradient(const uint16_t* g, const uint16_t* relu_y, int64_t i, __mmask16 mask) {
  __mmask16 pass = mask;
  if (relu_y != nullptr) {
    const __m256i yb = _mm256_maskz_loadu_epi16(mask, relu_y + i);
    pass = _mm256_mask_test_epi16_mask(mask, yb, yb);
  }
  return Fmt::load(g + i, pass);
}

template <typename Fmt>
float sum(const uint16_t* x, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  over_lanes(n, [&](int64_t i, __mmask16 m) { acc = _mm512_add_ps(acc, Fmt::load(x + i, m)); });
  return lanes::fold_sum(acc);
}

template <typename Fmt>
float centered_squares(const uint16_t* x, int64_t n, float mean) {
  const __m512 mv = _mm512_set1_ps(mean);
  __m512 acc = _mm512_setzero_ps();
  over_lanes(n, [&](int64_t i, __mmask16 m) {
    const __m512 d = _mm512_maskz_sub_ps(m, Fmt::load(x + i, m), mv);  // dot_f32's tail reads +0
    acc = _mm512_add_ps(acc, _mm512_mul_ps(d, d));
  });
  return lanes::fold_sum(acc);
}

template <typename Fmt>
void grad_sums(const uint16_t* x, const uint16_t* g, const uint16_t* relu_y, int64_t n, float mean,
               float rstd, float& sum_g, float& sum_gx) {
  const __m512 mv = _mm512_set1_ps(mean), rs = _mm512_set1_ps(rstd);
  __m512 acc_g = _mm512_setzero_ps(), acc_gx = _mm512_setzero_ps();
  over_lanes(n, [&](int64_t i, __mmask16 m) {
    const __m512 gv = masked_gradient<Fmt>(g, relu_y, i, m);
    const __m512 xhat = _mm512_maskz_mul_ps(m, _mm512_sub_ps(Fmt::load(x + i, m), mv), rs);
    acc_g = _mm512_add_ps(acc_g, gv);
    acc_gx = _mm512_add_ps(acc_gx, _mm512_mul_ps(gv, xhat));
  });
  sum_g = lanes::fold_sum(acc_g);
  sum_gx = lanes::fold_sum(acc_gx);
}

template <typename Fmt>
void rows(const uint16_t* x, uint16_t* y, int64_t n, float mean, float rstd, float scale,
          float shift, bool relu) {
  const __m512 m = _mm512_set1_ps(mean), rs = _mm512_set1_ps(rstd);
  const __m512 sc = _mm512_set1_ps(scale), sh = _mm512_set1_ps(shift);
  const __m512 zero = _mm512_setzero_ps();
  Fmt::store_rows(n, y, [&](int64_t i, __mmask16 mask) {
    const __m512 v = _mm512_add_ps(
        _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(Fmt::load(x + i, mask), m), rs), sc), sh);
    // vmaxps returns its second operand where either is NaN or both are zeros.
    return relu ? _mm512_max_ps(v, zero) : v;
  });
}

template <typename Fmt>
void grad_rows(const uint16_t* x, const uint16_t* g, const uint16_t* relu_y, uint16_t* dx,
               int64_t n, float mean, float rstd, float scale, float mean_g, float mean_gx,
               bool training) {
  const __m512 m = _mm512_set1_ps(mean), rs = _mm512_set1_ps(rstd);
  const __m512 factor = _mm512_set1_ps(scale * rstd);
  const __m512 mg = _mm512_set1_ps(mean_g), mgx = _mm512_set1_ps(mean_gx);
  Fmt::store_rows(n, dx, [&](int64_t i, __mmask16 mask) {
    const __m512 gv = masked_gradient<Fmt>(g, relu_y, i, mask);
    if (!training) return _mm512_mul_ps(factor, gv);
    const __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(Fmt::load(x + i, mask), m), rs);
    return _mm512_mul_ps(factor, _mm512_sub_ps(_mm512_sub_ps(gv, mg), _mm512_mul_ps(xhat, mgx)));
  });
}

// A window's columns 2j and 2j + 1 for 16 windows of a row: 32 consecutive inputs (fewer
// under the mask), each pair the two halves of a 32-bit lane, the left one the low half.
struct Columns {
  __m512 left, right;
};

// Each lane of (left, right) rounded to bf16 (rows_to_bf16's rounding, lane by lane) and read
// back exactly as fp32.
Columns rounded(Half fmt, Columns v) {
  if (fmt == Half::bf16) {
    const __m512i r = convert32(v.left, v.right);
    const __m512i lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(r));
    const __m512i hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(r, 1));
    return {.left = _mm512_castsi512_ps(_mm512_slli_epi32(lo, 16)),
            .right = _mm512_castsi512_ps(_mm512_slli_epi32(hi, 16))};
  }
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return {.left = _mm512_cvtph_ps(_mm512_cvtps_ph(v.left, kNearest)),
          .right = _mm512_cvtph_ps(_mm512_cvtps_ph(v.right, kNearest))};
}

// The two columns of 16 windows of one input row, normalized, cut at zero and rounded.
Columns normalized_columns(Half fmt, const uint16_t* at, __mmask32 mask, __m512 m, __m512 rs,
                           __m512 sc, __m512 sh) {
  const __m512i v = _mm512_maskz_loadu_epi16(mask, at);
  Columns c;
  if (fmt == Half::bf16) {
    c.left = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    c.right = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int32_t(0xffff0000u))));
  } else {
    c.left = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_and_si512(v, _mm512_set1_epi32(0xffff))));
    c.right = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
  }
  // rows' operations in its order; vmaxps returns its second operand (+0) for a NaN or -0.
  const __m512 zero = _mm512_setzero_ps();
  auto normalize = [&](__m512 x) {
    return _mm512_max_ps(
        _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(x, m), rs), sc), sh), zero);
  };
  return rounded(fmt, {.left = normalize(c.left), .right = normalize(c.right)});
}

}  // namespace

void batch_norm_relu_pool_plane(Half fmt, const uint16_t* x, int64_t h, int64_t w, uint16_t* y,
                                uint8_t* window, float mean, float rstd, float scale, float shift) {
  const __m512 m = _mm512_set1_ps(mean), rs = _mm512_set1_ps(rstd);
  const __m512 sc = _mm512_set1_ps(scale), sh = _mm512_set1_ps(shift);
  const int64_t oh = h / 2, ow = w / 2;
  for (int64_t i = 0; i < oh; ++i) {
    for (int64_t j = 0; j < ow; j += 16) {
      const int64_t n = ow - j < 16 ? ow - j : 16;
      const __mmask16 out_mask = __mmask16((1u << n) - 1);
      const __mmask32 in_mask = __mmask32((uint64_t(1) << (2 * n)) - 1);
      const uint16_t* top = x + 2 * i * w + 2 * j;
      const Columns a = normalized_columns(fmt, top, in_mask, m, rs, sc, sh);
      const Columns b = normalized_columns(fmt, top + w, in_mask, m, rs, sc, sh);
      // Every value is +0 or more, never NaN: a later one wins only when greater.
      __m512 held = a.left;
      __m512i place = _mm512_setzero_si512();
      const __m512 order[3] = {a.right, b.left, b.right};
      for (int k = 0; k < 3; ++k) {
        const __mmask16 take = _mm512_cmp_ps_mask(order[k], held, _CMP_GT_OQ);
        held = _mm512_mask_blend_ps(take, held, order[k]);
        place = _mm512_mask_blend_epi32(take, place, _mm512_set1_epi32(k + 1));
      }
      const int64_t o = i * ow + j;
      if (fmt == Half::bf16) {
        _mm512_mask_cvtepi32_storeu_epi16(y + o, out_mask,
                                          _mm512_srli_epi32(_mm512_castps_si512(held), 16));
      } else {  // an f16 value read back: converting again is exact
        _mm256_mask_storeu_epi16(y + o, out_mask, _mm512_cvtps_ph(held, _MM_FROUND_TO_NEAREST_INT));
      }
      if (window) _mm512_mask_cvtepi32_storeu_epi8(window + o, out_mask, place);
    }
  }
}

void batch_norm_relu_pool_scatter_plane(const uint16_t* y, const uint8_t* window, const uint16_t* g,
                                        int64_t h, int64_t w, uint16_t* out) {
  const int64_t oh = h / 2, ow = w / 2;
  for (int64_t i = 0; i < oh; ++i) {
    for (int64_t j = 0; j < ow; j += 16) {
      const int64_t n = ow - j < 16 ? ow - j : 16;
      const __mmask16 m = __mmask16((1u << n) - 1);
      const __mmask32 pairs = __mmask32((uint64_t(1) << (2 * n)) - 1);
      const int64_t o = i * ow + j;
      const __m512i gv = _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, g + o));
      const __m512i yv = _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, y + o));
      const __m512i place = _mm512_maskz_cvtepu8_epi32(m, _mm_maskz_loadu_epi8(m, window + o));
      const __mmask16 pass =
          _mm512_test_epi32_mask(yv, yv) & _mm512_test_epi32_mask(gv, _mm512_set1_epi32(0x7fff));
      // Each 32-bit lane holds a window's two columns: the left one in the low half.
      auto row = [&](int first_place) {
        const __mmask16 left =
            pass & _mm512_cmpeq_epi32_mask(place, _mm512_set1_epi32(first_place));
        const __mmask16 right =
            pass & _mm512_cmpeq_epi32_mask(place, _mm512_set1_epi32(first_place + 1));
        return _mm512_or_si512(_mm512_maskz_mov_epi32(left, gv),
                               _mm512_maskz_mov_epi32(right, _mm512_slli_epi32(gv, 16)));
      };
      _mm512_mask_storeu_epi16(out + 2 * i * w + 2 * j, pairs, row(0));
      _mm512_mask_storeu_epi16(out + (2 * i + 1) * w + 2 * j, pairs, row(2));
    }
    if (w % 2 != 0) out[2 * i * w + w - 1] = out[(2 * i + 1) * w + w - 1] = 0;
  }
  for (int64_t k = 2 * oh * w; k < h * w; ++k) out[k] = 0;
}

float batch_norm_sum(Half fmt, const uint16_t* x, int64_t n) {
  return fmt == Half::bf16 ? sum<Bf16>(x, n) : sum<F16>(x, n);
}

float batch_norm_centered_squares(Half fmt, const uint16_t* x, int64_t n, float mean) {
  return fmt == Half::bf16 ? centered_squares<Bf16>(x, n, mean) : centered_squares<F16>(x, n, mean);
}

void batch_norm_grad_sums(Half fmt, const uint16_t* x, const uint16_t* g, const uint16_t* relu_y,
                          int64_t n, float mean, float rstd, float& sum_g, float& sum_gx) {
  if (fmt == Half::bf16) {
    grad_sums<Bf16>(x, g, relu_y, n, mean, rstd, sum_g, sum_gx);
  } else {
    grad_sums<F16>(x, g, relu_y, n, mean, rstd, sum_g, sum_gx);
  }
}

void batch_norm_rows(Half fmt, const uint16_t* x, uint16_t* y, int64_t n, float mean, float rstd,
                     float scale, float shift, bool relu) {
  if (fmt == Half::bf16) {
    rows<Bf16>(x, y, n, mean, rstd, scale, shift, relu);
  } else {
    rows<F16>(x, y, n, mean, rstd, scale, shift, relu);
  }
}

void batch_norm_grad_rows(Half fmt, const uint16_t* x, const uint16_t* g, const uint16_t* relu_y,
                          uint16_t* dx, int64_t n, float mean, float rstd, float scale,
                          float mean_g, float mean_gx, bool training) {
  if (fmt == Half::bf16) {
    grad_rows<Bf16>(x, g, relu_y, dx, n, mean, rstd, scale, mean_g, mean_gx, training);
  } else {
    grad_rows<F16>(x, g, relu_y, dx, n, mean, rstd, scale, mean_g, mean_gx, training);
  }
}

}  // namespace mixp::kernels::avx512_bf16
