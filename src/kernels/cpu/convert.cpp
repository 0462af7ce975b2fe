// The conversion kernels' candidates (kernels/convert.h), best first, ending with the scalar
// kernel: all give the same bits.
#include "kernels/convert.h"

namespace mixp::kernels {

Kernel<F32ToU16Fn> f32_to_f16("f32_to_f16",
                              {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::f32_to_f16},
                               {.name = "avx2", .isa = Isa::avx2, .fn = avx2::f32_to_f16},
                               {.name = "scalar", .fn = ref::f32_to_f16, .fallback = true}});

Kernel<F32ToU16Fn> f32_to_bf16(
    "f32_to_bf16",
    {{.name = "avx512_bf16", .isa = Isa::avx512_bf16, .fn = avx512_bf16::f32_to_bf16},
     {.name = "avx512", .isa = Isa::avx512, .fn = avx512::f32_to_bf16},
     {.name = "avx2", .isa = Isa::avx2, .fn = avx2::f32_to_bf16},
     {.name = "scalar", .fn = ref::f32_to_bf16, .fallback = true}});

Kernel<U16ToF32Fn> f16_to_f32("f16_to_f32",
                              {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::f16_to_f32},
                               {.name = "avx2", .isa = Isa::avx2, .fn = avx2::f16_to_f32},
                               {.name = "scalar", .fn = ref::f16_to_f32, .fallback = true}});

Kernel<U16ToF32Fn> bf16_to_f32("bf16_to_f32",
                               {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::bf16_to_f32},
                                {.name = "avx2", .isa = Isa::avx2, .fn = avx2::bf16_to_f32},
                                {.name = "scalar", .fn = ref::bf16_to_f32, .fallback = true}});

Kernel<F32ToFp8Fn> f32_to_e4m3("f32_to_e4m3",
                               {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::f32_to_e4m3},
                                {.name = "scalar", .fn = ref::f32_to_e4m3, .fallback = true}});

Kernel<F32ToFp8Fn> f32_to_e5m2("f32_to_e5m2",
                               {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::f32_to_e5m2},
                                {.name = "scalar", .fn = ref::f32_to_e5m2, .fallback = true}});

Kernel<Fp8ToF32Fn> e4m3_to_f32("e4m3_to_f32",
                               {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::e4m3_to_f32},
                                {.name = "avx2", .isa = Isa::avx2, .fn = avx2::e4m3_to_f32},
                                {.name = "scalar", .fn = ref::e4m3_to_f32, .fallback = true}});

Kernel<Fp8ToF32Fn> e5m2_to_f32("e5m2_to_f32",
                               {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::e5m2_to_f32},
                                {.name = "avx2", .isa = Isa::avx2, .fn = avx2::e5m2_to_f32},
                                {.name = "scalar", .fn = ref::e5m2_to_f32, .fallback = true}});

}  // namespace mixp::kernels
