// The layer norm row kernels' candidates (kernels/layer_norm_rows.h): AVX-512, then the scalar
// kernels, which give the same bits.
#include "kernels/layer_norm_rows.h"

namespace mixp::kernels {

Kernel<LayerNormRowF32Fn> layer_norm_row_f32(
    "layer_norm_row_f32", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::layer_norm_row_f32},
                           {.name = "scalar", .fn = ref::layer_norm_row_f32, .fallback = true}});

Kernel<LayerNormRowBf16Fn> layer_norm_row_bf16(
    "layer_norm_row_bf16",
    {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::layer_norm_row_bf16},
     {.name = "scalar", .fn = ref::layer_norm_row_bf16, .fallback = true}});

Kernel<LayerNormBackwardRowF32Fn> layer_norm_backward_row_f32(
    "layer_norm_backward_row_f32",
    {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::layer_norm_backward_row_f32},
     {.name = "scalar", .fn = ref::layer_norm_backward_row_f32, .fallback = true}});

Kernel<LayerNormBackwardRowBf16Fn> layer_norm_backward_row_bf16(
    "layer_norm_backward_row_bf16",
    {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::layer_norm_backward_row_bf16},
     {.name = "scalar", .fn = ref::layer_norm_backward_row_bf16, .fallback = true}});

}  // namespace mixp::kernels
