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

namespace mixp::kernels {

/// y[i] = gelu_tanh(x[i]); y may be x.
void gelu_tanh_f32(const float* x, float* y, int64_t n);
/// dx[i] = g[i] * gelu_tanh'(x[i]); dx may be g or x.
void gelu_tanh_backward_f32(const float* g, const float* x, float* dx, int64_t n);
/// gelu_tanh_f32 and its backward on bf16 bits: each input widened exactly, the fp32 kernel's
/// operations, and one rounding to bf16 (nearest even, subnormals kept): the bits of widening,
/// the fp32 kernel and f32_to_bf16, in one pass. The output may be an input.
void gelu_tanh_bf16(const uint16_t* x, uint16_t* y, int64_t n);
void gelu_tanh_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n);
/// relu and its backward on bf16 bits: y = x > 0 ? x : +0 and dx = x > 0 ? g : +0, a NaN g
/// quieted: the bits of widening, comparing in fp32 and rounding, without the widening (the
/// values pass through unchanged). The output may be an input.
void relu_bf16(const uint16_t* x, uint16_t* y, int64_t n);
void relu_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n);
/// y[i] = e^x[i]; y may be x.
void exp_f32(const float* x, float* y, int64_t n);
/// y[i] = e^(x[i] scale - shift), the product and the difference each rounded (no fused
/// multiply-add): attention's softmax rows, in one pass. y may be x.
void scale_shift_exp_f32(const float* x, float* y, int64_t n, float scale, float shift);
/// scale_shift_exp_f32, returning sum_f32 of the results (the same bits as the two calls), in
/// one pass.
float scale_shift_exp_sum_f32(const float* x, float* y, int64_t n, float scale, float shift);
/// x[i] = x[i] / d, each a correctly rounded division (a softmax row's normalization).
void divide_f32(float* x, int64_t n, float d);
/// dp[i] = p[i] (dp[i] - dot) scale, rounded after each operation in that order: attention's
/// score gradient from the probabilities p and their gradient dp.
void score_grad_f32(const float* p, float* dp, int64_t n, float dot, float scale);
/// x[0] + ... + x[n-1] in the fixed 16-lane order above; +0 for n == 0.
float sum_f32(const float* x, int64_t n);
/// a[0] b[0] + ... + a[n-1] b[n-1], each product rounded, summed in sum_f32's order.
float dot_f32(const float* a, const float* b, int64_t n);
/// The largest x[i], NaNs skipped (a NaN never wins); -inf for n == 0 or all NaN.
float max_f32(const float* x, int64_t n);
/// acc[i] += x[i] for i < n, x widened exactly (bf16 and f16 given as their bits): one row of a
/// sum over rows, such as a bias gradient's. One rounding per element, so any ISA gives the
/// same bits.
void accumulate_bf16(const uint16_t* x, float* acc, int64_t n);
void accumulate_f16(const uint16_t* x, float* acc, int64_t n);
void accumulate_f32(const float* x, float* acc, int64_t n);

namespace ref {
void gelu_tanh_f32(const float* x, float* y, int64_t n);
void gelu_tanh_backward_f32(const float* g, const float* x, float* dx, int64_t n);
void gelu_tanh_bf16(const uint16_t* x, uint16_t* y, int64_t n);
void gelu_tanh_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n);
void relu_bf16(const uint16_t* x, uint16_t* y, int64_t n);
void relu_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n);
void exp_f32(const float* x, float* y, int64_t n);
void scale_shift_exp_f32(const float* x, float* y, int64_t n, float scale, float shift);
float scale_shift_exp_sum_f32(const float* x, float* y, int64_t n, float scale, float shift);
void divide_f32(float* x, int64_t n, float d);
void score_grad_f32(const float* p, float* dp, int64_t n, float dot, float scale);
float sum_f32(const float* x, int64_t n);
float dot_f32(const float* a, const float* b, int64_t n);
float max_f32(const float* x, int64_t n);
void accumulate_bf16(const uint16_t* x, float* acc, int64_t n);
void accumulate_f16(const uint16_t* x, float* acc, int64_t n);
void accumulate_f32(const float* x, float* acc, int64_t n);
}  // namespace ref

namespace avx512 {
void gelu_tanh_f32(const float* x, float* y, int64_t n);
void gelu_tanh_backward_f32(const float* g, const float* x, float* dx, int64_t n);
void gelu_tanh_bf16(const uint16_t* x, uint16_t* y, int64_t n);
void gelu_tanh_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n);
void relu_bf16(const uint16_t* x, uint16_t* y, int64_t n);
void relu_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n);
void exp_f32(const float* x, float* y, int64_t n);
void scale_shift_exp_f32(const float* x, float* y, int64_t n, float scale, float shift);
float scale_shift_exp_sum_f32(const float* x, float* y, int64_t n, float scale, float shift);
void divide_f32(float* x, int64_t n, float d);
void score_grad_f32(const float* p, float* dp, int64_t n, float dot, float scale);
float sum_f32(const float* x, int64_t n);
float dot_f32(const float* a, const float* b, int64_t n);
float max_f32(const float* x, int64_t n);
void accumulate_bf16(const uint16_t* x, float* acc, int64_t n);
void accumulate_f16(const uint16_t* x, float* acc, int64_t n);
void accumulate_f32(const float* x, float* acc, int64_t n);
}  // namespace avx512

namespace avx512_bf16 {
void gelu_tanh_bf16(const uint16_t* x, uint16_t* y, int64_t n);
void gelu_tanh_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n);
}  // namespace avx512_bf16

/// The constants both versions share (constexpr, so no inline function crosses ISA files).
namespace vmath {
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693145751953125f;       // 0x3f317200: n * kLn2Hi is exact
inline constexpr float kLn2Lo = 1.42860682030941723e-6f;  // ln 2 - kLn2Hi
inline constexpr float kExpMin = -150.0f, kExpMax = 128.0f;
// 1/k! for k = 7 down to 2: the Horner order.
inline constexpr float kExpPoly[6] = {1.0f / 5040, 1.0f / 720, 1.0f / 120,
                                      1.0f / 24,   1.0f / 6,   1.0f / 2};
inline constexpr float kGeluK = 0.797884560802865356f;  // sqrt(2 / pi)
inline constexpr float kGeluA = 0.044715f;
inline constexpr float kGeluA3 = 3 * 0.044715f;
inline constexpr int kLanes = 16;  // of sum_f32, dot_f32 and max_f32
}  // namespace vmath

}  // namespace mixp::kernels
