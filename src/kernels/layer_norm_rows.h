// One row of layer norm (ops/layer_norm.cpp) in fp32, forward and backward: the scalar kernels
// and the AVX-512 ones, which give the same bits (each step one fp32 operation in the same
// order, and the row sums in sum_f32's and dot_f32's lane order, kernels/vmath.h).
//
//   NormStats s = kernels::layer_norm_row_bf16(x, n, w, b, 1e-5f, scratch, y_bits);
//   kernels::layer_norm_backward_row_bf16(x, g_bits, w, s, n,
//                                         {.xhat = xh, .gw = gw, .pw = dw, .pb = db, .dx = dx});
#pragma once

#include <cstdint>

#include "kernels/layer_norm_rows_isa.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// The forward of one row of n: mean = sum_f32(x, n) / n, v = x - mean,
/// rstd = 1 / sqrt(dot_f32(v, v, n) / n + eps), y = v rstd, then times w[j] where w is not
/// null, then plus b[j] where b is not null, each operation rounded to fp32 in that order.
/// v is n floats of scratch; v may be x, and y may be v. The _bf16 form rounds y once to bf16
/// (nearest even, subnormals kept) and stores its bits.
using LayerNormRowF32Fn = NormStats(const float* x, int64_t n, const float* w, const float* b,
                                    float eps, float* v, float* y);
using LayerNormRowBf16Fn = NormStats(const float* x, int64_t n, const float* w, const float* b,
                                     float eps, float* v, uint16_t* y);
extern Kernel<LayerNormRowF32Fn> layer_norm_row_f32;
extern Kernel<LayerNormRowBf16Fn> layer_norm_row_bf16;

/// The backward of one row of n, from x, its stats and the result's gradient g (fp32, or bf16
/// bits widened exactly): xhat = (x - mean) rstd and gw = g w (g where w is null);
/// pw[j] += g xhat and pb[j] += g; and where dx is wanted,
/// dx = rstd ((gw - sum_f32(gw) / n) - xhat (dot_f32(gw, xhat) / n)).
using LayerNormBackwardRowF32Fn = void(const float* x, const float* g, const float* w, NormStats s,
                                       int64_t n, const NormBackwardRow& out);
using LayerNormBackwardRowBf16Fn = void(const float* x, const uint16_t* g, const float* w,
                                        NormStats s, int64_t n, const NormBackwardRow& out);
extern Kernel<LayerNormBackwardRowF32Fn> layer_norm_backward_row_f32;
extern Kernel<LayerNormBackwardRowBf16Fn> layer_norm_backward_row_bf16;

}  // namespace mixp::kernels
