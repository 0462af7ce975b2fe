// The kernels of gradient clipping (mixp/optim/clip_grad.h): the sums of squares of a gradient's
// chunks, and the gradient scaled in place. Private to mixp.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/registry.h"

namespace mixp::kernels {

/// The sum of the squares of each chunk of `chunk` elements (a multiple of kBlock) of `gradient`
/// (f32, f64, bf16 or f16), in chunk order: in double when `f64`, else in float, summed a block
/// of kBlock at a time and the blocks summed in order, so the same for any thread count and any
/// piece of the gradient that starts at a chunk.
using GradChunkSquaresFn = std::vector<double>(const Tensor& gradient, int64_t chunk, bool f64);
extern Kernel<GradChunkSquaresFn> grad_chunk_squares;

/// gradient *= factor in place, in fp32 (f64 for f64) with one rounding back to its dtype
/// (f32, f64, bf16 or f16).
using ScaleGradientFn = void(Tensor& gradient, double factor);
extern Kernel<ScaleGradientFn> scale_gradient;

}  // namespace mixp::kernels
