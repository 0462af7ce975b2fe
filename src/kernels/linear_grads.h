// A linear layer's weight and bias gradients, chosen by the registry. Private to mixp.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

/// dw [out, in] = g^T x summed over the rows, g [rows, out] and x [rows, in] of one dtype,
/// accumulated in fp32 (f64 for f64) and rounded once to that dtype; dw has it too, or is f32
/// for bf16 or f16 g and x (an autocast linear's fp32 weight), and then holds the rounded sums
/// widened back, as the cast of a narrow dw would. db, if defined, is an [out] tensor for the
/// sum of g's rows; returns whether it was filled. Candidates:
///   fused_bf16: bf16 g and x where the CPU has AVX-512 BF16, from 512 rows into a bf16 dw, from
///               any rows into an f32 one: one pass over g (linear_weight_grad_fast) packs it
///               for the product and sums its rows into db, in row order in fp32, rounded once
///               to db's dtype (a separate pass over g was about 3% of a bf16 gpt step). Below
///               512 rows oneDNN's product is faster, but not with the widening pass after it
///               that the tiles' store makes for an f32 dw (docs/performance.md).
///   tiles_f16:  f16 g and x into an f32 dw, a batch of up to 128 rows, where the CPU has
///               AVX-512 F: mixp's fp32 tiles (kernels/f16_tiles.h), each sum a chain of FMAs
///               over the rows, rounded to f16's value as it is stored into dw;
///   f16_into_f32: f16 g and x into an f32 dw: the product's fp32 sums into dw, then rounded
///               to f16's values in place (kernels/round_to_f16.h): the bits of unfused, with
///               no f16 copy.
///   unfused:    dw by kernels/gemm_product.h (into a narrow copy first for an f32 dw of narrow
///               g); db is left to the caller's sum of g.
using LinearWeightGradsFn = bool(const Tensor& g, const Tensor& x, Tensor& dw, Tensor& db);
extern Kernel<LinearWeightGradsFn> linear_weight_grads;

/// A linear layer's input gradient dx [rows, in] = g w (w [out, in]: kernels/gemm_product.h's
/// product, into dx's dtype) together with linear_weight_grads(g, x, dw, db), whose result it
/// returns. The same bits as the two kernels one after the other. Candidates:
///   overlapped_bf16: bf16 g, x and dx, an fp32 w (an autocast linear's weight), up to 64
///                    rows and from 2^24 multiply-adds per product, with more than one thread,
///                    where the CPU has AVX-512 BF16: the two products gemm_product and
///                    linear_weight_grads would run on the pair tiles (pairs_bf16, fused_bf16),
///                    each on one thread, side by side in one parallel region. At 64 rows each
///                    takes about 0.1-0.3 ms, and a region of its own costs it a wake-up of the
///                    other core (tens of microseconds, far more when the machine is busy).
///   separate:        gemm_product, then linear_weight_grads.
using LinearGradsFn = bool(const Tensor& g, const Tensor& x, const Tensor& w, Tensor& dx,
                           Tensor& dw, Tensor& db);
extern Kernel<LinearGradsFn> linear_grads;

}  // namespace mixp::kernels
