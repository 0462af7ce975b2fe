// The conversion kernels behind mixp::convert (mixp/convert.h), on raw buffers: each rounds to
// nearest even, fp8 with the given scale and overflow rule; every candidate gives the scalar
// one's bits. Private to mixp.
#pragma once

#include "kernels/convert_kernels.h"
#include "kernels/registry.h"

namespace mixp::kernels {

extern Kernel<F32ToU16Fn> f32_to_f16;
extern Kernel<F32ToU16Fn> f32_to_bf16;
extern Kernel<U16ToF32Fn> f16_to_f32;
extern Kernel<U16ToF32Fn> bf16_to_f32;
extern Kernel<F32ToFp8Fn> f32_to_e4m3;
extern Kernel<F32ToFp8Fn> f32_to_e5m2;
extern Kernel<Fp8ToF32Fn> e4m3_to_f32;
extern Kernel<Fp8ToF32Fn> e5m2_to_f32;

}  // namespace mixp::kernels
