// kernels/vmath.h on AVX-512 F, 16 lanes a step; the tail goes to the scalar kernels, which
// compute the same bits.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/vmath_lanes_avx512.h"
#include "kernels/vmath_isa.h"

namespace mixp::kernels::avx512 {

using namespace vmath;
using namespace lanes;

// The missing lanes of a tail add +0 (or a product of zeros), which changes no lane: x + +0 = x
// for every x but -0, and a lane, starting at +0, is never -0 under round-to-nearest.
float sum_f32(const float* x, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + i));
  if (i < n) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(tail_mask(n - i), x + i));
  return fold_sum(acc);
}

float dot_f32(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    acc = _mm512_add_ps(
        acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
  return fold_sum(acc);
}

float max_f32(const float* x, int64_t n) {
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  __m512 acc = minus_inf;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_max_ps(_mm512_loadu_ps(x + i), acc);
  if (i < n) acc = _mm512_max_ps(_mm512_mask_loadu_ps(minus_inf, tail_mask(n - i), x + i), acc);
  return fold_max(acc);
}

// The tails are masked: the lanes outside them are neither read nor written.
void accumulate_bf16(const uint16_t* x, float* acc, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail_mask(n - i);
    const __m512i bits = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i));
    const __m512 v = _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16));
    _mm512_mask_storeu_ps(acc + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, acc + i), v));
  }
}

void accumulate_f16(const uint16_t* x, float* acc, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail_mask(n - i);
    const __m512 v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i));
    _mm512_mask_storeu_ps(acc + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, acc + i), v));
  }
}

void accumulate_f32(const float* x, float* acc, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail_mask(n - i);
    _mm512_mask_storeu_ps(
        acc + i, m,
        _mm512_add_ps(_mm512_maskz_loadu_ps(m, acc + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}

// A bf16 value is above zero when its bits, as a signed 16-bit integer, lie in [1, 0x7f80]:
// positive, not zero, not NaN (infinity is 0x7f80). 32 elements a step.
void relu_bf16(const uint16_t* x, uint16_t* y, int64_t n) {
  const __m512i zero = _mm512_setzero_si512(), inf = _mm512_set1_epi16(0x7f80);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i v = _mm512_loadu_si512(x + i);
    const __mmask32 above = _mm512_cmpgt_epi16_mask(v, zero) & _mm512_cmple_epi16_mask(v, inf);
    _mm512_storeu_si512(y + i, _mm512_maskz_mov_epi16(above, v));
  }
  ref::relu_bf16(x + i, y + i, n - i);
}

void relu_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n) {
  const __m512i zero = _mm512_setzero_si512(), inf = _mm512_set1_epi16(0x7f80);
  const __m512i abs = _mm512_set1_epi16(0x7fff), quiet = _mm512_set1_epi16(0x40);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i v = _mm512_loadu_si512(x + i), grad = _mm512_loadu_si512(g + i);
    const __mmask32 above = _mm512_cmpgt_epi16_mask(v, zero) & _mm512_cmple_epi16_mask(v, inf);
    // A NaN gradient comes out quiet, as rounding its fp32 widening to bf16 would make it.
    const __mmask32 nan = _mm512_cmpgt_epi16_mask(_mm512_and_si512(grad, abs), inf);
    const __m512i quieted = _mm512_mask_mov_epi16(grad, nan, _mm512_or_si512(grad, quiet));
    _mm512_storeu_si512(dx + i, _mm512_maskz_mov_epi16(above, quieted));
  }
  ref::relu_backward_bf16(g + i, x + i, dx + i, n - i);
}

void exp_f32(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp16(_mm512_loadu_ps(x + i)));
  // The tail masked rather than scalar: attention's causal rows are short, and the scalar
  // kernel's std::fma is a libm call where FMA is not a compile-time ISA. Same bits per lane.
  if (i < n) {
    const __mmask16 tail = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, tail, exp16(_mm512_maskz_loadu_ps(tail, x + i)));
  }
}

void scale_shift_exp_f32(const float* x, float* y, int64_t n, float scale, float shift) {
  const __m512 s = _mm512_set1_ps(scale), b = _mm512_set1_ps(shift);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 t = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), s), b);
    _mm512_storeu_ps(y + i, exp16(t));
  }
  if (i < n) {
    const __mmask16 tail = tail_mask(n - i);
    const __m512 t = _mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), s), b);
    _mm512_mask_storeu_ps(y + i, tail, exp16(t));
  }
}

// The sum as sum_f32 adds it: the same lanes in the same order, the tail's missing lanes +0.
float scale_shift_exp_sum_f32(const float* x, float* y, int64_t n, float scale, float shift) {
  const __m512 s = _mm512_set1_ps(scale), b = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), s), b));
    _mm512_storeu_ps(y + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 tail = tail_mask(n - i);
    const __m512 t = _mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), s), b);
    const __m512 e = _mm512_maskz_mov_ps(tail, exp16(t));
    _mm512_mask_storeu_ps(y + i, tail, e);
    acc = _mm512_add_ps(acc, e);
  }
  return fold_sum(acc);
}

void divide_f32(float* x, int64_t n, float d) {
  const __m512 v = _mm512_set1_ps(d);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_div_ps(_mm512_loadu_ps(x + i), v));
  if (i < n) {
    const __mmask16 tail = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, tail, _mm512_div_ps(_mm512_maskz_loadu_ps(tail, x + i), v));
  }
}

void score_grad_f32(const float* p, float* dp, int64_t n, float dot, float scale) {
  const __m512 d = _mm512_set1_ps(dot), s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 w =
        _mm512_mul_ps(_mm512_loadu_ps(p + i), _mm512_sub_ps(_mm512_loadu_ps(dp + i), d));
    _mm512_storeu_ps(dp + i, _mm512_mul_ps(w, s));
  }
  if (i < n) {
    const __mmask16 tail = tail_mask(n - i);
    const __m512 w = _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, p + i),
                                   _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, dp + i), d));
    _mm512_mask_storeu_ps(dp + i, tail, _mm512_mul_ps(w, s));
  }
}

void gelu_tanh_f32(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, gelu16(_mm512_loadu_ps(x + i)));
  }
  ref::gelu_tanh_f32(x + i, y + i, n - i);
}

void gelu_tanh_backward_f32(const float* g, const float* x, float* dx, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dx + i, gelu_grad16(_mm512_loadu_ps(g + i), _mm512_loadu_ps(x + i)));
  }
  ref::gelu_tanh_backward_f32(g + i, x + i, dx + i, n - i);
}

// The bf16 versions: the widening and the rounding in registers, where the block path wrote
// and read fp32 copies (their conversions were 5% of a gpt amp-bf16 step). For CPUs without
// AVX-512 BF16; with it, vmath_avx512_bf16.cpp's round faster.
void gelu_tanh_bf16(const uint16_t* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    store_bf16(y + i, gelu16(load_bf16(x + i)));
  }
  ref::gelu_tanh_bf16(x + i, y + i, n - i);
}

void gelu_tanh_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) store_bf16(dx + i, gelu_grad16(load_bf16(g + i), load_bf16(x + i)));
  ref::gelu_tanh_backward_bf16(g + i, x + i, dx + i, n - i);
}

}  // namespace mixp::kernels::avx512
