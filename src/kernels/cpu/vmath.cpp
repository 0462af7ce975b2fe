// The vmath kernels' candidates (kernels/vmath.h): AVX-512 BF16 where it has its own, AVX-512,
// and the scalar twins, which give the same bits.
#include "kernels/vmath.h"

#include "kernels/vmath_isa.h"

namespace mixp::kernels {

Kernel<GeluTanhF32Fn> gelu_tanh_f32(
    "gelu_tanh_f32", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::gelu_tanh_f32},
                      {.name = "scalar", .fn = ref::gelu_tanh_f32, .fallback = true}});

Kernel<GeluTanhBackwardF32Fn> gelu_tanh_backward_f32(
    "gelu_tanh_backward_f32",
    {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::gelu_tanh_backward_f32},
     {.name = "scalar", .fn = ref::gelu_tanh_backward_f32, .fallback = true}});

Kernel<GeluTanhBf16Fn> gelu_tanh_bf16(
    "gelu_tanh_bf16",
    {{.name = "avx512_bf16", .isa = Isa::avx512_bf16, .fn = avx512_bf16::gelu_tanh_bf16},
     {.name = "avx512", .isa = Isa::avx512, .fn = avx512::gelu_tanh_bf16},
     {.name = "scalar", .fn = ref::gelu_tanh_bf16, .fallback = true}});

Kernel<GeluTanhBackwardBf16Fn> gelu_tanh_backward_bf16(
    "gelu_tanh_backward_bf16",
    {{.name = "avx512_bf16", .isa = Isa::avx512_bf16, .fn = avx512_bf16::gelu_tanh_backward_bf16},
     {.name = "avx512", .isa = Isa::avx512, .fn = avx512::gelu_tanh_backward_bf16},
     {.name = "scalar", .fn = ref::gelu_tanh_backward_bf16, .fallback = true}});

Kernel<ReluBf16Fn> relu_bf16("relu_bf16",
                             {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::relu_bf16},
                              {.name = "scalar", .fn = ref::relu_bf16, .fallback = true}});

Kernel<ReluBackwardBf16Fn> relu_backward_bf16(
    "relu_backward_bf16", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::relu_backward_bf16},
                           {.name = "scalar", .fn = ref::relu_backward_bf16, .fallback = true}});

Kernel<ExpF32Fn> exp_f32("exp_f32", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::exp_f32},
                                     {.name = "scalar", .fn = ref::exp_f32, .fallback = true}});

Kernel<ScaleShiftExpF32Fn> scale_shift_exp_f32(
    "scale_shift_exp_f32",
    {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::scale_shift_exp_f32},
     {.name = "scalar", .fn = ref::scale_shift_exp_f32, .fallback = true}});

Kernel<ScaleShiftExpSumF32Fn> scale_shift_exp_sum_f32(
    "scale_shift_exp_sum_f32",
    {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::scale_shift_exp_sum_f32},
     {.name = "scalar", .fn = ref::scale_shift_exp_sum_f32, .fallback = true}});

Kernel<DivideF32Fn> divide_f32("divide_f32",
                               {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::divide_f32},
                                {.name = "scalar", .fn = ref::divide_f32, .fallback = true}});

Kernel<ScoreGradF32Fn> score_grad_f32(
    "score_grad_f32", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::score_grad_f32},
                       {.name = "scalar", .fn = ref::score_grad_f32, .fallback = true}});

Kernel<SumF32Fn> sum_f32("sum_f32", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::sum_f32},
                                     {.name = "scalar", .fn = ref::sum_f32, .fallback = true}});

Kernel<DotF32Fn> dot_f32("dot_f32", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::dot_f32},
                                     {.name = "scalar", .fn = ref::dot_f32, .fallback = true}});

Kernel<MaxF32Fn> max_f32("max_f32", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::max_f32},
                                     {.name = "scalar", .fn = ref::max_f32, .fallback = true}});

Kernel<AccumulateBf16Fn> accumulate_bf16(
    "accumulate_bf16", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::accumulate_bf16},
                        {.name = "scalar", .fn = ref::accumulate_bf16, .fallback = true}});

Kernel<AccumulateF16Fn> accumulate_f16(
    "accumulate_f16", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::accumulate_f16},
                       {.name = "scalar", .fn = ref::accumulate_f16, .fallback = true}});

Kernel<AccumulateF32Fn> accumulate_f32(
    "accumulate_f32", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::accumulate_f32},
                       {.name = "scalar", .fn = ref::accumulate_f32, .fallback = true}});

}  // namespace mixp::kernels
