// The product behind matmul, bmm, linear and the attention's products, chosen by the registry.
// Private to mixp.
#pragma once

#include "kernels/gemm.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// out = op(a) op(b) (+ bias) per s. a and b: the same dtype, f32, f64, f16 or bf16, or a bf16 or
/// f16 a with an f32 b, which is then read as b.to(a's dtype) (rounded once, to nearest even):
/// an autocast linear's fp32 weight, rounded where the candidate packs it; bias: n
/// values of any floating dtype added to every row of the sums before they are rounded, or
/// undefined (the oneDNN candidates take a bias for batch 1 only). out: contiguous, batch x m x
/// n elements of any floating dtype; f64 outputs take f64 inputs.
/// Sums accumulate in fp32 (f64 for f64) and round once to out's dtype, to nearest even; the
/// reference sums in double, stores them as fp32 (f64) and rounds those to a narrower out.
/// "Where the CPU has AVX-512 BF16" below is gemm_fast_has_bf16(): best_isa(), which IsaLimit
/// does not lower. Candidates, first that applies:
///   pairs_bf16:  bf16 into bf16 where the CPU has AVX-512 BF16, from 512 rows (any rows for
///                an f32 b, which the packing rounds), for the shapes of
///                matmul_pairs_supported, by mixp's pair tiles (matmul_pairs_bf16);
///   onednn_bf16: bf16 into bf16 where the CPU has AVX-512 BF16, oneDNN rounding the fp32 sums
///                as it stores them (it flushes fp32 subnormal sums to zero, as vdpbf16ps does);
///   tiles_f16:   an f16 a with an f32 or f16 b into f16 or f32, a batch of up to 128 rows
///                (m, or k with a transposed), where the CPU has AVX-512 F: mixp's fp32 tiles
///                (kernels/f16_tiles.h), which widen a and round b to f16's values as they
///                pack them, each sum a chain of FMAs in the order of k;
///   onednn:      every dtype but f64; f16, and bf16 where the CPU has no AVX-512 BF16, widened
///                exactly to f32 first (an f32 b with an f16 a rounded to f16's values in one
///                pass, kernels/round_to_f16.h: the same fp32 operands as the cast widened);
///   reference:   plain loops summing in double (gemm_reference).
/// The last two round a narrower out from fp32 blocks of at most about 8 MiB.
using GemmProductFn = void(const GemmShape& s, const Tensor& a, const Tensor& b, const Tensor& bias,
                           Tensor& out);
extern Kernel<GemmProductFn> gemm_product;

}  // namespace mixp::kernels
