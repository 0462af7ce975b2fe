// What the attention kernels share (kernels/scaled_dot_product_attention.h,
// kernels/multi_head_attention.h): the sizes, where the rows of each head are, and the softmax
// row math. Private to mixp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/vmath.h"
#include "mixp/float_types.h"

namespace mixp::kernels::attention {

struct Dims {
  int64_t bh = 0, t = 0, dh = 0;  // batch * heads, sequence length, head size
  bool causal = true;
  int64_t visible(int64_t i) const { return causal ? i + 1 : t; }  // keys row i attends to
};

template <typename A>
A inverse_sqrt_head_size(const Dims& d) {
  return A(1.0 / std::sqrt(double(d.dh)));
}

// The first n unscaled scores of a row become its probabilities in place; returns the row's
// log-sum-exp of the scaled scores. fp32 rows use the vectorized max, exp and sum (libm's expf
// and serial sums were most of this loop); max(s) scale is max(s scale) exactly, since
// scale > 0 and rounding is monotonic.
template <typename A>
A softmax_row(A* row, int64_t n, A scale) {
  A m = -std::numeric_limits<A>::infinity();
  A total = 0;
  if constexpr (std::is_same_v<A, float>) {
    m = max_f32(row, n) * scale;
    total = scale_shift_exp_sum_f32(row, row, n, scale, m);
    divide_f32(row, n, total);
  } else {
    for (int64_t j = 0; j < n; ++j) m = std::max(m, row[j] * scale);
    for (int64_t j = 0; j < n; ++j) total += std::exp(row[j] * scale - m);
    for (int64_t j = 0; j < n; ++j) row[j] = std::exp(row[j] * scale - (m + std::log(total)));
  }
  return m + std::log(total);
}

// The probabilities again, from the first n unscaled scores and the saved log-sum-exp.
template <typename A>
void probabilities_row(A* row, int64_t n, A scale, A lse) {
  if constexpr (std::is_same_v<A, float>) {
    scale_shift_exp_f32(row, row, n, scale, lse);
  } else {
    for (int64_t j = 0; j < n; ++j) row[j] = std::exp(row[j] * scale - lse);
  }
}

// The first n entries of dP become dS = P (dP - rowsum(P dP)) scale in place.
template <typename A>
void score_grad_row(const A* p, A* dp, int64_t n, A scale) {
  if constexpr (std::is_same_v<A, float>) {
    score_grad_f32(p, dp, n, dot_f32(p, dp, n), scale);
  } else {
    A dot = 0;
    for (int64_t j = 0; j < n; ++j) dot += p[j] * dp[j];
    for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - dot) * scale;
  }
}

/// Where one operand's rows are: row i of (batch, head) pair p starts at element
/// (p / heads) batch_stride + (p % heads) head_stride + i row_stride. [BH, T, Dh] tensors are
/// dense(); the q, k and v of a packed projection [B, T, 3C] and the merged heads [B, T, C] are
/// strided, so that multi_head_attention reads and writes them in place.
struct HeadRows {
  int64_t heads = 1, batch_stride = 0, head_stride = 0, row_stride = 0;
  int64_t at(int64_t pair) const {
    return pair / heads * batch_stride + pair % heads * head_stride;
  }
  static HeadRows dense(const Dims& d) {
    return HeadRows{.heads = 1, .batch_stride = d.t * d.dh, .head_stride = 0, .row_stride = d.dh};
  }
};

}  // namespace mixp::kernels::attention
