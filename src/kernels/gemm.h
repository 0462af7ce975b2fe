// Batched matrix products with fp32 accumulation. Private to mixp.
//   fast: oneDNN matmul for f32 and bf16 inputs (bf16 only where the CPU has AVX-512 BF16;
//         the caller widens otherwise), f32 output, or bf16 for bf16 inputs (oneDNN rounds the
//         fp32 sums to nearest even as it stores them, flushing fp32 subnormals to zero).
//   pairs: mixp's own bf16 products on AVX-512 BF16 (kernels/pair_gemm.h), for the linear
//         layers: matmul_pairs_bf16 (bf16 result, A not transposed) and linear_weight_grad_fast
//         (dW = dY^T X with the bias gradient), each sum rounded once, subnormals kept.
//   reference: plain loops accumulating in double, f32 or f64 output.
#pragma once

#include <cstdint>

#include "mixp/dtype.h"

namespace mixp::kernels {

/// C[b] = op(A[b]) op(B[b]) for b < batch, with C [m, n] row-major and contiguous per batch.
/// A is stored [m, k] row-major ([k, m] when trans_a); B is [k, n] ([n, k] when trans_b).
/// batch_a and batch_b are batch or 1 (1: the same matrix for every b).
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t batch_a = 1, batch_b = 1;
};

/// in: f32 or bf16; out (C's dtype): f32, or bf16 for bf16 inputs. bias, if not null (batch 1
/// only), holds n values added to every row of C (to the fp32 sums, rounding once). Uses oneDNN.
void gemm_fast(const GemmShape& s, DType in, const void* a, const void* b, void* c, DType out,
               const float* bias = nullptr);
/// in: f32, f64, f16 or bf16; C is f64 for f64 inputs, else f32.
void gemm_reference(const GemmShape& s, DType in, const void* a, const void* b, void* c);
/// A linear layer's weight and bias gradients in one pass over dy, on AVX-512 BF16
/// (kernels/cpu/linear_weight_grad.cpp): dw [out, in] = dy^T x, summed in fp32 and rounded once
/// to bf16 (to nearest even, subnormals kept) and stored as bf16, or widened back to fp32 where
/// dw_dtype is f32, and db [out] = the fp32 sums of dy's rows, added in row order; db may be
/// null. dy [rows, out] and x [rows, in] are bf16 bits. `workspace` holds
/// linear_weight_grad_workspace_bytes(rows, in, out, dw_dtype, threads) bytes, and at most
/// `threads` threads run. The bits do not depend on the thread count. Needs
/// gemm_fast_has_bf16() and sizes of at least 1.
void linear_weight_grad_fast(int64_t rows, int64_t in, int64_t out, const void* dy, const void* x,
                             void* dw, DType dw_dtype, float* db, void* workspace, int threads);
int64_t linear_weight_grad_workspace_bytes(int64_t rows, int64_t in, int64_t out, DType dw_dtype,
                                           int threads);
/// C [m, n] = A op(B) (+ bias) for bf16 A [m, k] (not transposed) and B, with a bf16 C: the fp32
/// sums, plus bias[column] when bias is not null, each rounded once to bf16 (nearest even,
/// subnormals kept), from mixp's own pair tiles (kernels/cpu/matmul_pairs.cpp). B is bf16, or
/// f32 (b_dtype), each value then rounded to bf16 (nearest even) as it is packed. For the shapes
/// of matmul_pairs_supported: batch 1, A not transposed, k even and at most 4096, n a multiple
/// of 16 (any n for B stored [n][k] and at most 64 rows), on AVX-512 BF16. `workspace` holds
/// matmul_pairs_workspace_bytes(s, threads) bytes, and at most `threads` threads run; the bits
/// do not depend on how many.
bool matmul_pairs_supported(const GemmShape& s);
int64_t matmul_pairs_workspace_bytes(const GemmShape& s, int threads);
void matmul_pairs_bf16(const GemmShape& s, const void* a, const void* b, DType b_dtype, void* c,
                       const float* bias, void* workspace, int threads);
/// True when gemm_fast takes bf16 inputs on this CPU.
bool gemm_fast_has_bf16();

}  // namespace mixp::kernels
