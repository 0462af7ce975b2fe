// The kernels of kernels/vmath.h for the active ISA.
#include "kernels/vmath.h"

#include "mixp/cpu.h"

namespace mixp::kernels {
namespace {
bool use_avx512() { return active_isa() >= Isa::avx512; }
}  // namespace

void gelu_tanh_f32(const float* x, float* y, int64_t n) {
  use_avx512() ? avx512::gelu_tanh_f32(x, y, n) : ref::gelu_tanh_f32(x, y, n);
}

void gelu_tanh_backward_f32(const float* g, const float* x, float* dx, int64_t n) {
  use_avx512() ? avx512::gelu_tanh_backward_f32(g, x, dx, n)
               : ref::gelu_tanh_backward_f32(g, x, dx, n);
}

void gelu_tanh_bf16(const uint16_t* x, uint16_t* y, int64_t n) {
  if (active_isa() >= Isa::avx512_bf16) return avx512_bf16::gelu_tanh_bf16(x, y, n);
  use_avx512() ? avx512::gelu_tanh_bf16(x, y, n) : ref::gelu_tanh_bf16(x, y, n);
}

void gelu_tanh_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n) {
  if (active_isa() >= Isa::avx512_bf16) return avx512_bf16::gelu_tanh_backward_bf16(g, x, dx, n);
  use_avx512() ? avx512::gelu_tanh_backward_bf16(g, x, dx, n)
               : ref::gelu_tanh_backward_bf16(g, x, dx, n);
}

void relu_bf16(const uint16_t* x, uint16_t* y, int64_t n) {
  use_avx512() ? avx512::relu_bf16(x, y, n) : ref::relu_bf16(x, y, n);
}

void relu_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n) {
  use_avx512() ? avx512::relu_backward_bf16(g, x, dx, n) : ref::relu_backward_bf16(g, x, dx, n);
}

void exp_f32(const float* x, float* y, int64_t n) {
  use_avx512() ? avx512::exp_f32(x, y, n) : ref::exp_f32(x, y, n);
}

void scale_shift_exp_f32(const float* x, float* y, int64_t n, float scale, float shift) {
  use_avx512() ? avx512::scale_shift_exp_f32(x, y, n, scale, shift)
               : ref::scale_shift_exp_f32(x, y, n, scale, shift);
}

float scale_shift_exp_sum_f32(const float* x, float* y, int64_t n, float scale, float shift) {
  return use_avx512() ? avx512::scale_shift_exp_sum_f32(x, y, n, scale, shift)
                      : ref::scale_shift_exp_sum_f32(x, y, n, scale, shift);
}

void divide_f32(float* x, int64_t n, float d) {
  use_avx512() ? avx512::divide_f32(x, n, d) : ref::divide_f32(x, n, d);
}

void score_grad_f32(const float* p, float* dp, int64_t n, float dot, float scale) {
  use_avx512() ? avx512::score_grad_f32(p, dp, n, dot, scale)
               : ref::score_grad_f32(p, dp, n, dot, scale);
}

float sum_f32(const float* x, int64_t n) {
  return use_avx512() ? avx512::sum_f32(x, n) : ref::sum_f32(x, n);
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return use_avx512() ? avx512::dot_f32(a, b, n) : ref::dot_f32(a, b, n);
}

float max_f32(const float* x, int64_t n) {
  return use_avx512() ? avx512::max_f32(x, n) : ref::max_f32(x, n);
}

void accumulate_bf16(const uint16_t* x, float* acc, int64_t n) {
  use_avx512() ? avx512::accumulate_bf16(x, acc, n) : ref::accumulate_bf16(x, acc, n);
}

void accumulate_f16(const uint16_t* x, float* acc, int64_t n) {
  use_avx512() ? avx512::accumulate_f16(x, acc, n) : ref::accumulate_f16(x, acc, n);
}

void accumulate_f32(const float* x, float* acc, int64_t n) {
  use_avx512() ? avx512::accumulate_f32(x, acc, n) : ref::accumulate_f32(x, acc, n);
}

}  // namespace mixp::kernels
