// Scalar versions of the pair products and packings of kernels/pair_gemm.h, for the tests that
// hold the AVX-512 BF16 ones to them. Each lane's two products are exact in fp32 (bf16 has 8
// significant bits) and are added to the sum one at a time.
#include <cmath>
#include <cstring>

#include "kernels/pair_gemm.h"
#include "kernels/vmath_isa.h"
#include "mixp/float_types.h"

namespace mixp::kernels::ref {
namespace {

float widen(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

void pair_gemm(const PairGemm& g) {
  for (int64_t i = 0; i < g.m; ++i) {
    // The same limits as the tiles of 6 rows in the AVX-512 BF16 version.
    const int64_t tile_last = (i / 6) * 6 + (g.m - (i / 6) * 6 < 6 ? g.m - (i / 6) * 6 : 6);
    int64_t n_end = g.n;
    if (g.row_limit >= 0) {
      const int64_t need = (g.row_limit + tile_last + 15) / 16 * 16;
      if (need < n_end) n_end = need;
    }
    int64_t pairs = g.pairs;
    if (g.pair_limit >= 0) {
      const int64_t need = (g.pair_limit + tile_last + 1) / 2;
      if (need < pairs) pairs = need;
    }
    const int64_t tile_first = i / 6 * 6;
    const int64_t first =
        g.first_term >= 0 && tile_first > g.first_term ? (tile_first - g.first_term) / 2 : 0;
    for (int64_t j = 0; j < n_end; ++j) {
      float sum = g.accumulate && !g.c_bf16 ? g.c[i * g.ldc + j] : 0.0f;
      for (int64_t p = first; p < pairs; ++p) {
        const uint32_t word =
            g.a_f32 ? uint32_t(bfloat16(g.a_f32[2 * (i * g.a_row + p)]).bits) |
                          uint32_t(bfloat16(g.a_f32[2 * (i * g.a_row + p) + 1]).bits) << 16
                    : g.a[i * g.a_row + p * g.a_pair];
        const uint16_t* b = g.b + p * g.ldb + 2 * j;
        sum += widen(uint16_t(word & 0xffff)) * widen(b[0]);
        sum += widen(uint16_t(word >> 16)) * widen(b[1]);
      }
      if (g.c_bf16) {
        g.c_bf16[i * g.ldc + j] = bfloat16(g.bias ? sum + g.bias[j] : sum).bits;
      } else if (g.widened) {
        g.c[i * g.ldc + j] = float(bfloat16(sum));
      } else {
        g.c[i * g.ldc + j] = sum;
      }
    }
  }
}

void pack_row_pairs(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                    int64_t dst_ld) {
  for (int64_t r = 0; r < rows + rows % 2; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      dst[(r / 2) * dst_ld + 2 * c + r % 2] = r < rows ? src[r * ld + c] : uint16_t(0);
    }
  }
}

void pack_row_pairs_summing(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols,
                            uint16_t* dst, int64_t dst_ld, float* sums) {
  pack_row_pairs(src, ld, rows, cols, dst, dst_ld);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) sums[c] += widen(src[r * ld + c]);
  }
}

void pack_column_pairs(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                       int64_t dst_ld) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[(c / 2) * dst_ld + 2 * r + c % 2] = src[r * ld + c];
  }
}

void pack_row_pairs_f32(const float* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                        int64_t dst_ld) {
  for (int64_t r = 0; r < rows + rows % 2; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      dst[(r / 2) * dst_ld + 2 * c + r % 2] = r < rows ? bfloat16(src[r * ld + c]).bits : uint16_t(0);
    }
  }
}

void pack_column_pairs_f32(const float* src, int64_t ld, int64_t rows, int64_t cols,
                           uint16_t* dst, int64_t dst_ld) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      dst[(c / 2) * dst_ld + 2 * r + c % 2] = bfloat16(src[r * ld + c]).bits;
    }
  }
}

void transpose_to_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                       const float* bias, uint16_t* dst, int64_t ld_dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = src[r * ld_src + c];
      dst[c * ld_dst + r] = bfloat16(bias ? v + bias[r] : v).bits;
    }
  }
}

void round_to_bf16_widened(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = float(bfloat16(x[i]));
}

void divide_to_bf16(const float* x, int64_t n, float d, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = bfloat16(x[i] / d).bits;
}

void score_grad_to_bf16(const float* p, const float* dp, int64_t n, float dot, float scale,
                        uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float weighted = p[i] * (dp[i] - dot);
    out[i] = bfloat16(weighted * scale).bits;
  }
}

void softmax_rows_to_bf16(float* s, int64_t ld, int64_t rows, int64_t first_n, int64_t n_step,
                          float scale, uint16_t* out, int64_t out_ld, int64_t extent, float* lse) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * ld;
    uint16_t* out_row = out + r * out_ld;
    const int64_t n = first_n + r * n_step;
    const float shift = max_f32(row, n) * scale;
    const float total = scale_shift_exp_sum_f32(row, row, n, scale, shift);
    divide_to_bf16(row, n, total, out_row);
    for (int64_t j = n; j < extent; ++j) out_row[j] = 0;
    lse[r] = shift + std::log(total);
  }
}

void probabilities_rows(float* s, int64_t ld, int64_t rows, int64_t first_n, int64_t n_step,
                        float scale, const float* lse, int64_t extent) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * ld;
    const int64_t n = first_n + r * n_step;
    scale_shift_exp_f32(row, row, n, scale, lse[r]);
    for (int64_t j = n; j < extent; ++j) row[j] = 0;
  }
}

void score_grad_rows_to_bf16(const float* p, const float* dp, int64_t ld, int64_t rows,
                             int64_t first_n, int64_t n_step, float scale, uint16_t* out,
                             int64_t out_ld, int64_t extent) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* p_row = p + r * ld;
    const float* dp_row = dp + r * ld;
    uint16_t* out_row = out + r * out_ld;
    const int64_t n = first_n + r * n_step;
    score_grad_to_bf16(p_row, dp_row, n, dot_f32(p_row, dp_row, n), scale, out_row);
    for (int64_t j = n; j < extent; ++j) out_row[j] = 0;
  }
}

}  // namespace mixp::kernels::ref
