// fp32 values rounded to fp16's, kept in fp32, chosen by the registry. Private to mixp.
//
// Under fp16 autocast on a CPU without fp16 arithmetic a product of fp16 operands is an fp32
// product of their exact widenings; an fp32 weight rounded this way is that widening in one
// pass, where a cast to fp16 and a widening back to fp32 are two (kernels/gemm_product.h,
// kernels/linear_grads.h).
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

/// dst = src.to(f16).to(f32) elementwise: each value rounded to nearest even to fp16 (overflow
/// to inf, subnormals kept, NaN as mixp::convert makes it), the result widened exactly. src and
/// dst are contiguous f32 tensors of the same numel; dst may be src (in place). The bits do not
/// depend on the thread count. Candidates:
///   avx512: the hardware's conversions, there and back, 16 values a step, in chunks over the
///           threads;
///   scalar: float16's own conversions, the same chunks.
using RoundToF16ValuesFn = void(const Tensor& src, Tensor& dst);
extern Kernel<RoundToF16ValuesFn> round_to_f16_values;

}  // namespace mixp::kernels
