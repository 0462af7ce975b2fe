// Conversion kernels on raw buffers, one set per ISA: the candidates of kernels/convert.h's
// registry kernels. Private to mixp: mixp/convert.h is the interface.
//
// The ISA files are compiled with their own -m flags, so they must not define or instantiate
// inline functions shared with other translation units (the linker could keep an AVX-512 copy
// for everyone). They use intrinsics and plain loops only, and hand their tails to ref::.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mixp/float_types.h"

namespace mixp::kernels {

using F32ToU16Fn = void(const float* src, uint16_t* dst, size_t n);
using U16ToF32Fn = void(const uint16_t* src, float* dst, size_t n);
using F32ToFp8Fn = void(const float* src, uint8_t* dst, size_t n, float scale, Overflow overflow);
using Fp8ToF32Fn = void(const uint8_t* src, float* dst, size_t n, float scale_inv);
/// dst[i] = src[i] rounded to f16 and widened back (f32_to_f16 then f16_to_f32, in one pass);
/// dst may be src.
using F32ToF32Fn = void(const float* src, float* dst, size_t n);

namespace ref {
void f32_to_f16(const float* src, uint16_t* dst, size_t n);
void f16_to_f32(const uint16_t* src, float* dst, size_t n);
void f32_to_bf16(const float* src, uint16_t* dst, size_t n);
void bf16_to_f32(const uint16_t* src, float* dst, size_t n);
void f32_to_e4m3(const float* src, uint8_t* dst, size_t n, float scale, Overflow overflow);
void f32_to_e5m2(const float* src, uint8_t* dst, size_t n, float scale, Overflow overflow);
void e4m3_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv);
void e5m2_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv);
void f32_round_to_f16(const float* src, float* dst, size_t n);
}  // namespace ref

namespace avx2 {
void f32_to_f16(const float* src, uint16_t* dst, size_t n);
void f16_to_f32(const uint16_t* src, float* dst, size_t n);
void f32_to_bf16(const float* src, uint16_t* dst, size_t n);
void bf16_to_f32(const uint16_t* src, float* dst, size_t n);
void e4m3_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv);
void e5m2_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv);
}  // namespace avx2

namespace avx512 {
void f32_to_f16(const float* src, uint16_t* dst, size_t n);
void f16_to_f32(const uint16_t* src, float* dst, size_t n);
void f32_to_bf16(const float* src, uint16_t* dst, size_t n);
void bf16_to_f32(const uint16_t* src, float* dst, size_t n);
void f32_to_e4m3(const float* src, uint8_t* dst, size_t n, float scale, Overflow overflow);
void f32_to_e5m2(const float* src, uint8_t* dst, size_t n, float scale, Overflow overflow);
void e4m3_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv);
void e5m2_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv);
void f32_round_to_f16(const float* src, float* dst, size_t n);
}  // namespace avx512

namespace avx512_bf16 {
void f32_to_bf16(const float* src, uint16_t* dst, size_t n);
}  // namespace avx512_bf16

}  // namespace mixp::kernels
