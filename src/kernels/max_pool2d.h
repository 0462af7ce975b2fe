// max_pool2d's kernels over contiguous [planes, h, w] tensors. Private to mixp.
#pragma once

#include "kernels/pool.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// y = the window maxima of x (f32, f64, f16 or bf16; y has x's dtype, each value copied, so
/// exact); index (i64, y's shape) = the position h * w + column within its plane of each
/// window's first maximum in row-major order. A NaN counts as the maximum, the first one wins.
using MaxPool2dFn = void(const Pool2dShape& p, const Tensor& x, Tensor& y, Tensor& index);
extern Kernel<MaxPool2dFn> max_pool2d_forward;

/// dx = dy sent to each window's index, summed where several windows chose the same input in
/// fp32 (f64 for f64; the fallback in double), and rounded once to dx's dtype (dy's).
using MaxPool2dBackwardFn = void(const Pool2dShape& p, const Tensor& dy, const Tensor& index,
                                 Tensor& dx);
extern Kernel<MaxPool2dBackwardFn> max_pool2d_backward;

}  // namespace mixp::kernels
