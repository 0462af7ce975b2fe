// The implementations of the vmath kernels (kernels/vmath.h), one namespace per instruction set:
// ref (the scalar twins, kernels/ref/vmath_ref.cpp), avx512 and avx512_bf16 (kernels/cpu/,
// compiled with those ISAs' flags). Light on purpose: the ISA files include it, and no inline
// function may cross files compiled for different ISAs. Private to mixp.
#pragma once

#include <cstdint>

namespace mixp::kernels {

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
