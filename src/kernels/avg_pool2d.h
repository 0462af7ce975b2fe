// The average poolings' kernels (avg_pool2d and adaptive_avg_pool2d) over contiguous
// [planes, h, w] tensors. Private to mixp.
#pragma once

#include "kernels/pool.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// y = the window means of x (f32, f64, f16 or bf16; y has x's dtype): each window summed in
/// fp32 (f64 for f64; the fallback in double), divided by the product of its axes' counts and
/// rounded once.
using AvgPool2dFn = void(const Pool2dShape& p, const Tensor& x, Tensor& y);
extern Kernel<AvgPool2dFn> avg_pool2d_forward;

/// dx = dy spread evenly over each window, summed where windows overlap, in fp32 (f64 for f64;
/// the fallback in double) and rounded once to dx's dtype (dy's).
using AvgPool2dBackwardFn = void(const Pool2dShape& p, const Tensor& dy, Tensor& dx);
extern Kernel<AvgPool2dBackwardFn> avg_pool2d_backward;

}  // namespace mixp::kernels
