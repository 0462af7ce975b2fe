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

}  // namespace

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
