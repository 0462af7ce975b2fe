// scaled_dot_product_attention's arithmetic (ops/scaled_dot_product_attention.cpp), chosen by the
// registry. Private to mixp.
//
// With S = q k^T / sqrt(Dh), P = softmax(S) per row (0 where masked), dO the output gradient:
//   out = P v, lse = the log-sum-exp of each row of S;
//   dV = P^T dO,  dP = dO V^T,  dS = P (dP - rowsum(P dP)) / sqrt(Dh),  dQ = dS K,  dK = dS^T Q.
// Scores, softmax and products accumulate in fp32 (f64 for f64) and each result rounds once to
// the inputs' dtype. For bf16 inputs the four products with P or dS as an operand (P V, P^T dO,
// dS K, dS^T Q) take P and dS rounded once to bf16 (to nearest even), as PyTorch's bf16 matmuls
// see them under autocast; the softmax, the log-sum-exp and dS itself (from the unrounded P)
// stay fp32. f32, f16 and f64 keep P and dS in the accumulation dtype.
// Candidates, first that applies:
//   tiled_bf16: bf16 with Dh a multiple of 16 on AVX-512 BF16, one (batch, head) pair per task
//               with its operands in cache (cpu/attention_tiled_bf16.cpp);
//   chunked:    the products by kernels/gemm_product.h over chunks of pairs, the rows of scores
//               in parallel;
//   reference:  serial loops in double, rounding P and dS at the same points.
#pragma once

#include "kernels/attention_rows.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// q, k, v [BH, T, Dh] contiguous, one dtype (f32, f64, f16 or bf16) -> out (q's shape and
/// dtype) and lse [BH, T] (f32; f64 for f64).
using AttentionForwardFn = void(const Tensor& q, const Tensor& k, const Tensor& v,
                                const attention::Dims& d, Tensor& out, Tensor& lse);
extern Kernel<AttentionForwardFn> attention_forward;

/// dq, dk, dv (each of q's shape and dtype, or undefined where not needed) from q, k, v, the
/// forward's lse and g = dO of q's dtype. The reference recomputes lse from q and k.
using AttentionBackwardFn = void(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& lse, const Tensor& g, const attention::Dims& d,
                                 Tensor& dq, Tensor& dk, Tensor& dv);
extern Kernel<AttentionBackwardFn> attention_backward;

/// The row passes of the FP8 attention, on fp32 scores [BH, T, T] (rows independent, so every
/// candidate gives the same bits):
/// unscaled scores become P in place, lse [BH, T] gets each row's log-sum-exp of S;
using AttentionSoftmaxRowsFn = void(Tensor& scores, Tensor& lse, const attention::Dims& d);
extern Kernel<AttentionSoftmaxRowsFn> attention_softmax_rows;
/// unscaled scores become P in place from the saved lse;
using AttentionProbabilitiesRowsFn = void(Tensor& scores, const Tensor& lse,
                                          const attention::Dims& d);
extern Kernel<AttentionProbabilitiesRowsFn> attention_probabilities_rows;
/// dP becomes dS in place, 0 at the masked keys.
using AttentionScoreGradRowsFn = void(const Tensor& p, Tensor& dp, const attention::Dims& d);
extern Kernel<AttentionScoreGradRowsFn> attention_score_grad_rows;

}  // namespace mixp::kernels
