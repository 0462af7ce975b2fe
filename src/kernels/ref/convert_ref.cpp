// Scalar reference conversions: a loop over the storage types' own conversions. These define
// the bits every vector kernel must reproduce.
#include <bit>

#include "kernels/convert_kernels.h"

namespace mixp::kernels::ref {

void f32_to_f16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = float16(src[i]).bits;
}

void f16_to_f32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = float16::from_bits(src[i]);
}

void f32_round_to_f16(const float* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = float(float16(src[i]));
}

void f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bfloat16(src[i]).bits;
}

void bf16_to_f32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bfloat16::from_bits(src[i]);
}

void f32_to_e4m3(const float* src, uint8_t* dst, size_t n, float scale, Overflow overflow) {
  for (size_t i = 0; i < n; ++i) dst[i] = float8_e4m3(src[i] * scale, overflow).bits;
}

void f32_to_e5m2(const float* src, uint8_t* dst, size_t n, float scale, Overflow overflow) {
  for (size_t i = 0; i < n; ++i) dst[i] = float8_e5m2(src[i] * scale, overflow).bits;
}

void e4m3_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv) {
  for (size_t i = 0; i < n; ++i) dst[i] = float(float8_e4m3::from_bits(src[i])) * scale_inv;
}

void e5m2_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv) {
  for (size_t i = 0; i < n; ++i) dst[i] = float(float8_e5m2::from_bits(src[i])) * scale_inv;
}

}  // namespace mixp::kernels::ref
