// Vectorized fp32 math over contiguous buffers, for the ops whose scalar libm calls dominated
// the profile (gelu_tanh's tanhf and expm1f, docs/performance.md). Private to mixp.
//
// exp: x = n ln2 + r with n = nearest(x log2 e) and r by a two-part ln2 (Cody and Waite), so
// |r| <= ln2 / 2; e^r by its Taylor polynomial of degree 7 (truncation below 2^-27 relative)
// in fused multiply-adds; then r scaled by 2^n in one correctly rounded step (vscalefps,
// ldexp), which keeps subnormal results. Inputs are clamped to [-150, 128] first, where the
// result is already 0 or inf; NaN stays NaN.
//
// gelu_tanh: 0.5 x (1 + tanh(u)) = x sigmoid(2u) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x +
// 0.044715 x^3): one exp and one division, and no cancellation in 1 + tanh(u) for negative x.
// Its derivative is s (1 + 2 x (1 - s) du/dx) with s = sigmoid(2u), and 1 - s = e^(-2u) s.
//
// sum, dot and max: reductions over a row in one fixed order, 16 lanes wide, because a serial
// fp32 sum is one long chain of dependent additions (4 cycles each): attention's row loops and
// layer norm spent most of their time there. Lane l (0..15) adds the terms i = l, l + 16,
// l + 32, ... in turn, starting from +0; then lane l adds lane l + 8 (l < 8), l + 4 (l < 4),
// l + 2, l + 1, and lane 0 is the result. dot rounds each product before adding it. The order
// differs from a serial sum, so the last bits do too; it is the same order on every ISA.
//
// Every ISA gives the same bits: the AVX-512 kernels run the operations of the scalar ones in
// kernels/ref (vmath_ref.cpp), in the same order, each correctly rounded.
#pragma once

#include <cstdint>

#include "kernels/registry.h"

namespace mixp::kernels {

/// y[i] = gelu_tanh(x[i]); y may be x.
using GeluTanhF32Fn = void(const float* x, float* y, int64_t n);
extern Kernel<GeluTanhF32Fn> gelu_tanh_f32;
/// dx[i] = g[i] * gelu_tanh'(x[i]); dx may be g or x.
using GeluTanhBackwardF32Fn = void(const float* g, const float* x, float* dx, int64_t n);
extern Kernel<GeluTanhBackwardF32Fn> gelu_tanh_backward_f32;
/// gelu_tanh_f32 and its backward on bf16 bits: each input widened exactly, the fp32 kernel's
/// operations, and one rounding to bf16 (nearest even, subnormals kept): the bits of widening,
/// the fp32 kernel and f32_to_bf16, in one pass. The output may be an input.
using GeluTanhBf16Fn = void(const uint16_t* x, uint16_t* y, int64_t n);
extern Kernel<GeluTanhBf16Fn> gelu_tanh_bf16;
using GeluTanhBackwardBf16Fn = void(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n);
extern Kernel<GeluTanhBackwardBf16Fn> gelu_tanh_backward_bf16;
/// relu and its backward on bf16 bits: y = x > 0 ? x : +0 and dx = x > 0 ? g : +0, a NaN g
/// quieted: the bits of widening, comparing in fp32 and rounding, without the widening (the
/// values pass through unchanged). The output may be an input.
using ReluBf16Fn = void(const uint16_t* x, uint16_t* y, int64_t n);
extern Kernel<ReluBf16Fn> relu_bf16;
using ReluBackwardBf16Fn = void(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n);
extern Kernel<ReluBackwardBf16Fn> relu_backward_bf16;
/// y[i] = e^x[i]; y may be x.
using ExpF32Fn = void(const float* x, float* y, int64_t n);
extern Kernel<ExpF32Fn> exp_f32;
/// y[i] = e^(x[i] scale - shift), the product and the difference each rounded (no fused
/// multiply-add): attention's softmax rows, in one pass. y may be x.
using ScaleShiftExpF32Fn = void(const float* x, float* y, int64_t n, float scale, float shift);
extern Kernel<ScaleShiftExpF32Fn> scale_shift_exp_f32;
/// scale_shift_exp_f32, returning sum_f32 of the results (the same bits as the two calls), in
/// one pass.
using ScaleShiftExpSumF32Fn = float(const float* x, float* y, int64_t n, float scale, float shift);
extern Kernel<ScaleShiftExpSumF32Fn> scale_shift_exp_sum_f32;
/// x[i] = x[i] / d, each a correctly rounded division (a softmax row's normalization).
using DivideF32Fn = void(float* x, int64_t n, float d);
extern Kernel<DivideF32Fn> divide_f32;
/// dp[i] = p[i] (dp[i] - dot) scale, rounded after each operation in that order: attention's
/// score gradient from the probabilities p and their gradient dp.
using ScoreGradF32Fn = void(const float* p, float* dp, int64_t n, float dot, float scale);
extern Kernel<ScoreGradF32Fn> score_grad_f32;
/// x[0] + ... + x[n-1] in the fixed 16-lane order above; +0 for n == 0.
using SumF32Fn = float(const float* x, int64_t n);
extern Kernel<SumF32Fn> sum_f32;
/// a[0] b[0] + ... + a[n-1] b[n-1], each product rounded, summed in sum_f32's order.
using DotF32Fn = float(const float* a, const float* b, int64_t n);
extern Kernel<DotF32Fn> dot_f32;
/// The largest x[i], NaNs skipped (a NaN never wins); -inf for n == 0 or all NaN.
using MaxF32Fn = float(const float* x, int64_t n);
extern Kernel<MaxF32Fn> max_f32;
/// acc[i] += x[i] for i < n, x widened exactly (bf16 and f16 given as their bits): one row of a
/// sum over rows, such as a bias gradient's. One rounding per element, so any ISA gives the
/// same bits.
using AccumulateBf16Fn = void(const uint16_t* x, float* acc, int64_t n);
extern Kernel<AccumulateBf16Fn> accumulate_bf16;
using AccumulateF16Fn = void(const uint16_t* x, float* acc, int64_t n);
extern Kernel<AccumulateF16Fn> accumulate_f16;
using AccumulateF32Fn = void(const float* x, float* acc, int64_t n);
extern Kernel<AccumulateF32Fn> accumulate_f32;

}  // namespace mixp::kernels
