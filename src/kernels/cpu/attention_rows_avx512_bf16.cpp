// The tiled attention's row passes on AVX-512 BF16 (kernels/pair_gemm.h): the softmax rounded
// to bf16 with each row's log-sum-exp (forward), the probabilities again from the log-sum-exps
// and dS rounded to bf16 (backward). kRows rows go at a time, each pass over them interleaved.
// One row at a time, each row's max, exponentials, sum and division were short dependent chains
// (a gpt row has 1-256 values, up to 16 vectors) with a fold, a log and a registry call between
// them, and they took about a quarter of the attention's forward; interleaving rows gives the
// units independent work. Each row's arithmetic is the row functions' (max_f32,
// scale_shift_exp_sum_f32, divide_to_bf16; scale_shift_exp_f32; dot_f32, score_grad_to_bf16),
// lane for lane and in their order, so the bits are theirs.
#include <cmath>

#include "kernels/cpu/bf16_round_avx512_bf16.h"
#include "kernels/cpu/vmath_lanes_avx512.h"
#include "kernels/pair_gemm.h"

namespace mixp::kernels::avx512_bf16 {
namespace {

constexpr int kRows = 4;

// The rows of one group: where each starts (in s, read as `in`, or written in place as `row`;
// and in a second operand where there is one), how many values it has, and where its bf16
// result goes.
struct Group {
  float* row[kRows];
  const float* in[kRows];
  const float* other[kRows];
  uint16_t* out[kRows];
  int64_t n[kRows];
  int64_t longest;
};

// The rows of one call, r with first_n + r n_step values, and the operands they are read from
// and written to; groups of at most kRows of them.
struct Rows {
  int64_t ld, rows, first_n, n_step, extent;
  float* s = nullptr;  // null where s is only read, from `in`
  const float* in = nullptr;
  const float* other = nullptr;
  uint16_t* out = nullptr;
  int64_t out_ld = 0;

  int size(int64_t r0) const { return rows - r0 < kRows ? int(rows - r0) : kRows; }
  Group group(int64_t r0) const {
    Group g{};
    for (int r = 0; r < size(r0); ++r) {
      g.row[r] = s ? s + (r0 + r) * ld : nullptr;
      g.in[r] = in + (r0 + r) * ld;
      g.other[r] = other ? other + (r0 + r) * ld : nullptr;
      g.out[r] = out ? out + (r0 + r) * out_ld : nullptr;
      g.n[r] = first_n + (r0 + r) * n_step;
      if (g.n[r] > g.longest) g.longest = g.n[r];
    }
    return g;
  }
};

// Calls body.template operator()<R>(group) for each group of rows, R its size.
template <typename Body>
void for_groups(const Rows& rows, Body body) {
  for (int64_t r0 = 0; r0 < rows.rows; r0 += kRows) {
    const Group g = rows.group(r0);
    switch (rows.size(r0)) {
      case 4: body.template operator()<4>(g, r0); break;
      case 3: body.template operator()<3>(g, r0); break;
      case 2: body.template operator()<2>(g, r0); break;
      default: body.template operator()<1>(g, r0); break;
    }
  }
}

// Zeros in each row from its n to `extent`.
template <typename T, int R>
void zero_tails(T* const (&row)[kRows], const int64_t (&n)[kRows], int64_t extent) {
  for (int r = 0; r < R; ++r) {
    for (int64_t j = n[r]; j < extent; ++j) row[r][j] = T(0);
  }
}

// max_f32 of each row: the same lanes in the same order, the tail's missing lanes -inf.
template <int R>
void row_maxima(const Group& g, float (&m)[R]) {
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = minus_inf;
  for (int64_t i = 0; i < g.longest; i += 16) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      if (i + 16 <= g.n[r]) {
        acc[r] = _mm512_max_ps(_mm512_loadu_ps(g.in[r] + i), acc[r]);
      } else if (i < g.n[r]) {
        const __m512 x = _mm512_mask_loadu_ps(minus_inf, lanes::tail_mask(g.n[r] - i), g.in[r] + i);
        acc[r] = _mm512_max_ps(x, acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) m[r] = lanes::fold_max(acc[r]);
}

// scale_shift_exp_sum_f32 of each row, with shift[r]: the exponentials in place, the sums
// returned in total.
template <int R>
void row_exp_sums(const Group& g, float scale, const float (&shift)[R], float (&total)[R]) {
  const __m512 s = _mm512_set1_ps(scale);
  __m512 acc[R], b[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    b[r] = _mm512_set1_ps(shift[r]);
  }
  for (int64_t i = 0; i < g.longest; i += 16) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      float* x = g.row[r] + i;
      if (i + 16 <= g.n[r]) {
        const __m512 e = lanes::exp16(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(x), s), b[r]));
        _mm512_storeu_ps(x, e);
        acc[r] = _mm512_add_ps(acc[r], e);
      } else if (i < g.n[r]) {
        const __mmask16 tail = lanes::tail_mask(g.n[r] - i);
        const __m512 t = _mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x), s), b[r]);
        const __m512 e = _mm512_maskz_mov_ps(tail, lanes::exp16(t));
        _mm512_mask_storeu_ps(x, tail, e);
        acc[r] = _mm512_add_ps(acc[r], e);
      }
    }
  }
  for (int r = 0; r < R; ++r) total[r] = lanes::fold_sum(acc[r]);
}

// divide_to_bf16 of each row by its total, 32 lanes a step, the tail masked.
template <int R>
void row_quotients(const Group& g, const float (&total)[R]) {
  __m512 d[R];
  for (int r = 0; r < R; ++r) d[r] = _mm512_set1_ps(total[r]);
  for (int64_t i = 0; i < g.longest; i += 32) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float* x = g.in[r] + i;
      if (i + 32 <= g.n[r]) {
        const __m512 lo = _mm512_div_ps(_mm512_loadu_ps(x), d[r]);
        const __m512 hi = _mm512_div_ps(_mm512_loadu_ps(x + 16), d[r]);
        _mm512_storeu_si512(g.out[r] + i, convert32(lo, hi));
      } else if (i < g.n[r]) {
        const TailMasks m = tail_masks(size_t(g.n[r] - i));
        const __m512 lo = _mm512_div_ps(_mm512_maskz_loadu_ps(m.lo, x), d[r]);
        const __m512 hi = _mm512_div_ps(_mm512_maskz_loadu_ps(m.hi, x + 16), d[r]);
        _mm512_mask_storeu_epi16(g.out[r] + i, m.all, convert32(lo, hi));
      }
    }
  }
}

// scale_shift_exp_f32 of each row, shifted by its lse.
template <int R>
void row_probabilities(const Group& g, float scale, const float* lse) {
  const __m512 s = _mm512_set1_ps(scale);
  __m512 b[R];
  for (int r = 0; r < R; ++r) b[r] = _mm512_set1_ps(lse[r]);
  for (int64_t i = 0; i < g.longest; i += 16) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      float* x = g.row[r] + i;
      if (i + 16 <= g.n[r]) {
        _mm512_storeu_ps(x,
                         lanes::exp16(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(x), s), b[r])));
      } else if (i < g.n[r]) {
        const __mmask16 tail = lanes::tail_mask(g.n[r] - i);
        const __m512 t = _mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x), s), b[r]);
        _mm512_mask_storeu_ps(x, tail, lanes::exp16(t));
      }
    }
  }
}

// dot_f32 of each row of P (g.other) with its row of dP (g.in): the same lanes in the same
// order, the tail's missing lanes +0.
template <int R>
void row_dots(const Group& g, float (&dot)[R]) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < g.longest; i += 16) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float *p = g.other[r] + i, *dp = g.in[r] + i;
      if (i + 16 <= g.n[r]) {
        acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(dp)));
      } else if (i < g.n[r]) {
        const __mmask16 m = lanes::tail_mask(g.n[r] - i);
        acc[r] = _mm512_add_ps(
            acc[r], _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p), _mm512_maskz_loadu_ps(m, dp)));
      }
    }
  }
  for (int r = 0; r < R; ++r) dot[r] = lanes::fold_sum(acc[r]);
}

// score_grad_to_bf16 of each row, 32 lanes a step, the tail masked.
template <int R>
void row_score_grads(const Group& g, const float (&dot)[R], float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  __m512 d[R];
  for (int r = 0; r < R; ++r) d[r] = _mm512_set1_ps(dot[r]);
  auto grad = [&](int r, int64_t i, __mmask16 m) {
    const __m512 w = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, g.other[r] + i),
                                   _mm512_sub_ps(_mm512_maskz_loadu_ps(m, g.in[r] + i), d[r]));
    return _mm512_mul_ps(w, s);
  };
  for (int64_t i = 0; i < g.longest; i += 32) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      if (i + 32 <= g.n[r]) {
        _mm512_storeu_si512(g.out[r] + i, convert32(grad(r, i, 0xffff), grad(r, i + 16, 0xffff)));
      } else if (i < g.n[r]) {
        const TailMasks m = tail_masks(size_t(g.n[r] - i));
        _mm512_mask_storeu_epi16(g.out[r] + i, m.all,
                                 convert32(grad(r, i, m.lo), grad(r, i + 16, m.hi)));
      }
    }
  }
}

}  // namespace

void softmax_rows_to_bf16(float* s, int64_t ld, int64_t rows, int64_t first_n, int64_t n_step,
                          float scale, uint16_t* out, int64_t out_ld, int64_t extent, float* lse) {
  Rows all{.ld = ld, .rows = rows, .first_n = first_n, .n_step = n_step, .extent = extent};
  all.s = s;
  all.in = s;
  all.out = out;
  all.out_ld = out_ld;
  for_groups(all, [&]<int R>(const Group& g, int64_t r0) {
    float m[R], shift[R], total[R];
    row_maxima<R>(g, m);
    for (int r = 0; r < R; ++r) shift[r] = m[r] * scale;
    row_exp_sums<R>(g, scale, shift, total);
    row_quotients<R>(g, total);
    zero_tails<uint16_t, R>(g.out, g.n, extent);
    for (int r = 0; r < R; ++r) lse[r0 + r] = shift[r] + std::log(total[r]);
  });
}

void probabilities_rows(float* s, int64_t ld, int64_t rows, int64_t first_n, int64_t n_step,
                        float scale, const float* lse, int64_t extent) {
  Rows all{.ld = ld, .rows = rows, .first_n = first_n, .n_step = n_step, .extent = extent};
  all.s = s;
  all.in = s;
  for_groups(all, [&]<int R>(const Group& g, int64_t r0) {
    row_probabilities<R>(g, scale, lse + r0);
    zero_tails<float, R>(g.row, g.n, extent);
  });
}

void score_grad_rows_to_bf16(const float* p, const float* dp, int64_t ld, int64_t rows,
                             int64_t first_n, int64_t n_step, float scale, uint16_t* out,
                             int64_t out_ld, int64_t extent) {
  Rows all{.ld = ld, .rows = rows, .first_n = first_n, .n_step = n_step, .extent = extent};
  all.in = dp;
  all.other = p;
  all.out = out;
  all.out_ld = out_ld;
  for_groups(all, [&]<int R>(const Group& g, int64_t) {
    float dot[R];
    row_dots<R>(g, dot);
    row_score_grads<R>(g, dot, scale);
    zero_tails<uint16_t, R>(g.out, g.n, extent);
  });
}

}  // namespace mixp::kernels::avx512_bf16
