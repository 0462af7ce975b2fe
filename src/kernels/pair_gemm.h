// bf16 products on operands laid out in pairs, for AVX-512 BF16's vdpbf16ps, which
// multiplies two bf16 pairs lane by lane and adds both products to an fp32 lane. Private to
// mixp. Their users: the tiled attention (kernels/cpu/attention_tiled_bf16.cpp) and the
// linear layers' products (kernels/cpu/matmul_pairs.cpp, kernels/cpu/linear_weight_grad.cpp).
//
// A product C[m][n] = sum_k A[m][k] B[k][n] with k split into pairs (2p, 2p + 1):
// - A is read as 32-bit words, word (m, p) holding A[m][2p] and A[m][2p + 1], at
//   a + m * a_row + p * a_pair. A row-major bf16 matrix with an even row length is such a layout
//   (a_row = its row length / 2, a_pair = 1); so is the output of pack_row_pairs, transposed
//   (a_row = 1, a_pair = its row length).
// - B is packed by pairs of rows: element (k, n) at b[(k / 2) * ldb + 2 n + k % 2], which
//   pack_row_pairs makes from a row-major [K][N] and pack_column_pairs from a row-major [N][K]
//   (that is, B^T).
// - C is fp32, row-major with leading dimension ldc; n is a multiple of 16.
//
// Causal limits skip what a causal attention never reads. With row_limit >= 0 row r of C needs
// only the columns j < row_limit + r + 1 (the tile of rows [i, i + 6) computes the columns below
// row_limit + i + 6, rounded up to 16; others are left as they were). With pair_limit >= 0 row
// r needs only the reduction terms k < pair_limit + r + 1; the terms beyond it, up to the
// tile's rounded limit, must be zeros in A. With first_term >= 0 row r needs only the terms
// k >= r - first_term (the tile of rows from i starts at pair (i - first_term) / 2, rounded
// down); the terms before it in that pair must be zeros in A.
//
// Accumulation is fp32 with vdpbf16ps's rounding: each product of two bf16 is exact in fp32,
// and it flushes subnormal inputs and partial sums to zero (docs/formats.md). The scalar
// versions in ref:: accumulate a lane's two products and the sum the same way but not in the
// same order, so they agree within fp32 accumulation error, not to the bit.
//
// Example (C = A B for A [6][32] and B [32][16], both row-major bf16 bits):
//   pack_row_pairs(b, 16, 32, 16, bp, 32);       // bp: [16 pairs][16 columns][2]
//   PairGemm g{.a = (const uint32_t*)a, .a_row = 16, .a_pair = 1, .b = bp, .ldb = 32,
//              .c = c, .ldc = 16, .m = 6, .n = 16, .pairs = 16};
//   pair_gemm(g);
#pragma once

#include <cstdint>

namespace mixp::kernels {

struct PairGemm {
  const uint32_t* a = nullptr;
  int64_t a_row = 0, a_pair = 0;  // in 32-bit words
  const uint16_t* b = nullptr;
  int64_t ldb = 0;  // in bf16 elements, at least 2 n
  float* c = nullptr;
  int64_t ldc = 0;
  int64_t m = 0, n = 0, pairs = 0;
  bool accumulate = false;  // C += A B instead of C = A B
  int64_t row_limit = -1, pair_limit = -1, first_term = -1;
  // With c_bf16 set, c is neither read nor written: each fp32 sum, plus bias[column] where bias
  // is set (one fp32 addition), is rounded once to bf16 (nearest even, subnormals kept) into
  // c_bf16, whose rows are ldc elements apart. No accumulate with it; the limits apply as
  // they do to c.
  uint16_t* c_bf16 = nullptr;
  const float* bias = nullptr;
  // With a_f32 set, a is not read: word (m, p) is the two fp32 values a_f32[2 (m a_row + p)] and
  // the next, each rounded once to bf16 (nearest even, subnormals kept) as the tile reads it;
  // a_pair is 1 and there are no causal limits. A product of an fp32 weight's rows and packed
  // bf16 activations that reads the weight once, with no packing pass.
  const float* a_f32 = nullptr;
  // With widened (and c_bf16 unset), c is not read: each sum is rounded once to bf16 (nearest
  // even, subnormals kept) and stored in c widened back to fp32, a bf16 result and its cast to
  // fp32 in one store. No accumulate, bias or limits with it.
  bool widened = false;
};

// The scalar versions, which define what each function computes; avx512_bf16 below has the
// same functions.
namespace ref {
/// dst[(r / 2) * dst_ld + 2 c + r % 2] = src[r * ld + c] for r < rows, c < cols; an odd last row
/// pairs with zeros. dst_ld >= 2 cols.
void pack_row_pairs(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                    int64_t dst_ld);
/// pack_row_pairs, and sums[c] += src[r * ld + c] for every row r in order, each addition
/// rounded to fp32: a linear layer's bias gradient, from the pass that packs its output
/// gradient.
void pack_row_pairs_summing(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols,
                            uint16_t* dst, int64_t dst_ld, float* sums);
/// dst[(c / 2) * dst_ld + 2 r + c % 2] = src[r * ld + c] for r < rows, c < cols (cols and ld
/// even, src 4-byte aligned). dst_ld >= 2 rows.
void pack_column_pairs(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                       int64_t dst_ld);
/// pack_row_pairs and pack_column_pairs from fp32 values, each rounded once to bf16 (nearest
/// even, subnormals kept) as it is packed: a product of bf16 activations and an fp32 weight
/// reads the weight as weight.to(bf16) would give it, without that pass.
void pack_row_pairs_f32(const float* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                        int64_t dst_ld);
void pack_column_pairs_f32(const float* src, int64_t ld, int64_t rows, int64_t cols,
                           uint16_t* dst, int64_t dst_ld);
void pair_gemm(const PairGemm& g);
/// dst[c * ld_dst + r] = bf16(src[r * ld_src + c] + bias[r]) for r < rows, c < cols (bias may be
/// null: no addition): fp32 sums of C^T, rounded once each into C.
void transpose_to_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                       const float* bias, uint16_t* dst, int64_t ld_dst);
/// out[i] = x[i] rounded once to bf16 (nearest even, subnormals kept) and widened back to fp32.
void round_to_bf16_widened(const float* x, int64_t n, float* out);
/// out[i] = bf16(x[i] / d): a softmax row's normalization and its rounding for the products in
/// one pass (the division rounds to fp32 first, as divide_f32 then f32_to_bf16 would).
void divide_to_bf16(const float* x, int64_t n, float d, uint16_t* out);
/// out[i] = bf16((p[i] (dp[i] - dot)) scale), each operation rounded to fp32 first: attention's
/// score gradient dS rounded for its products, as score_grad_f32 then f32_to_bf16 would.
void score_grad_to_bf16(const float* p, const float* dp, int64_t n, float dot, float scale,
                        uint16_t* out);
/// Rows r < rows of s (ld apart: the unscaled scores of attention) each with n_r = first_n +
/// r n_step values: softmax(scale s) as kernels/attention_rows.h's softmax_row computes it (the
/// max, the exponentials of scale s - max scale and their sum, the quotients), each quotient
/// rounded once to bf16 into row r of out (out_ld apart), zeros from n_r to extent; lse[r] = max
/// scale + log(sum). The exponentials are left in s.
void softmax_rows_to_bf16(float* s, int64_t ld, int64_t rows, int64_t first_n, int64_t n_step,
                          float scale, uint16_t* out, int64_t out_ld, int64_t extent, float* lse);
/// Rows r < rows of s (ld apart: the unscaled scores of attention) each with n_r = first_n +
/// r n_step values: exp(scale s - lse[r]) in place, as kernels/attention_rows.h's
/// probabilities_row computes it, then zeros from n_r to extent.
void probabilities_rows(float* s, int64_t ld, int64_t rows, int64_t first_n, int64_t n_step,
                        float scale, const float* lse, int64_t extent);
/// Rows as above of P (p) and dP (dp), both ld apart: score_grad_to_bf16 of each row with dot
/// its dot_f32(p, dp, n_r), into row r of out (out_ld apart), zeros from n_r to extent.
void score_grad_rows_to_bf16(const float* p, const float* dp, int64_t ld, int64_t rows,
                             int64_t first_n, int64_t n_step, float scale, uint16_t* out,
                             int64_t out_ld, int64_t extent);
}  // namespace ref

namespace avx512_bf16 {
void pack_row_pairs(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                    int64_t dst_ld);
void pack_row_pairs_summing(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols,
                            uint16_t* dst, int64_t dst_ld, float* sums);
void pack_column_pairs(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                       int64_t dst_ld);
void pack_row_pairs_f32(const float* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                        int64_t dst_ld);
void pack_column_pairs_f32(const float* src, int64_t ld, int64_t rows, int64_t cols,
                           uint16_t* dst, int64_t dst_ld);
void pair_gemm(const PairGemm& g);
void transpose_to_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                       const float* bias, uint16_t* dst, int64_t ld_dst);
void round_to_bf16_widened(const float* x, int64_t n, float* out);
void softmax_rows_to_bf16(float* s, int64_t ld, int64_t rows, int64_t first_n, int64_t n_step,
                          float scale, uint16_t* out, int64_t out_ld, int64_t extent, float* lse);
void probabilities_rows(float* s, int64_t ld, int64_t rows, int64_t first_n, int64_t n_step,
                        float scale, const float* lse, int64_t extent);
void score_grad_rows_to_bf16(const float* p, const float* dp, int64_t ld, int64_t rows,
                             int64_t first_n, int64_t n_step, float scale, uint16_t* out,
                             int64_t out_ld, int64_t extent);
}  // namespace avx512_bf16

}  // namespace mixp::kernels
